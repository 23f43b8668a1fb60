import Foundation
import NIOPosix

/// The threads serve-tts does its C work on (resampling, encoding an
/// answer), off the event loops and the cooperative pool.
///
/// Its own pool, not NIO's process-wide `NIOThreadPool.singleton`: in a
/// process that also publishes (fsyncs of large files) or runs other
/// blocking work on the singleton, as the tests do with servers in the same
/// process, answers waited behind that work until clients timed out.
enum ServerThreads {
    static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: max(2, ProcessInfo.processInfo.activeProcessorCount))
        pool.start()
        return pool
    }()
}
