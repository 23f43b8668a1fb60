import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackState

#if canImport(Glibc)
import Glibc
#endif

/// The `flock` that processes sharing a state folder take turns with.
@Suite(.offThePool) struct FileLockTests {
    /// A refused attempt closes its descriptor once. Closed twice, the
    /// second close can take the number another thread has just been given
    /// (a chunk's spool, seen as EBADF under busy tile stripes).
    @Test func aRefusedAttemptNeverClosesAnotherThreadsFile() throws {
        let folder = try TemporaryFolder.make("tourpack-lock")
        defer { TemporaryFolder.remove(folder) }
        let lockURL = folder.appendingPathComponent("stripe.lock")
        let dataURL = folder.appendingPathComponent("data")
        try Data(repeating: 7, count: 4096).write(to: dataURL)
        let held = try FileLock(lockURL)
        defer { held.unlock() }

        let failures = LockedCounts(0)
        let readerDone = DispatchSemaphore(value: 0)
        let reader = Thread {
            defer { readerDone.signal() }
            for _ in 0..<20_000 {
                let fd = open(dataURL.path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { failures.update { $0 += 1 }; continue }
                var buffer = [UInt8](repeating: 0, count: 64)
                // Another thread's open may land between these calls; a
                // double close there makes this read fail with EBADF.
                for _ in 0..<4 where read(fd, &buffer, 16) < 0 { failures.update { $0 += 1 } }
                _ = close(fd)
            }
        }
        let done = DispatchSemaphore(value: 0)
        let attempts = Thread {
            for _ in 0..<20_000 { _ = try? FileLock.attempt(lockURL) }
            done.signal()
        }
        reader.start()
        attempts.start()
        done.wait()
        readerDone.wait()
        #expect(failures.snapshot == 0, "reads failed \(failures.snapshot) times: a descriptor was closed under them")
    }
}
