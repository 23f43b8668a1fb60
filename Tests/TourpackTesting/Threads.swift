import Foundation

/// Runs `body(0)` … `body(count - 1)` on that many threads at once and
/// waits for them all: as many clients as asked, where Dispatch's
/// `concurrentPerform` would run only as many as there are cores. Blocks:
/// for `.offThePool` suites.
package func onThreads(_ count: Int, _ body: @escaping (Int) -> Void) {
    nonisolated(unsafe) let body = body
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        Thread {
            body(index)
            group.leave()
        }.start()
    }
    group.wait()
}

/// Threads that wait for one another: `wait()` returns once all `parties` called it.
package final class Barrier: @unchecked Sendable {
    private let condition = NSCondition()
    private let parties: Int
    private var waiting = 0
    private var generation = 0

    package init(_ parties: Int) { self.parties = parties }

    package func wait() {
        condition.lock()
        defer { condition.unlock() }
        let mine = generation
        waiting += 1
        if waiting == parties {
            waiting = 0
            generation += 1
            condition.broadcast()
            return
        }
        while generation == mine { condition.wait() }
    }
}
