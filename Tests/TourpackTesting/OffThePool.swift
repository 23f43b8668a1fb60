import Foundation
package import Testing

/// Keeps blocking test code off Swift's cooperative pool.
///
/// The pool has one thread per core: two on a 2-core CI machine. A test that
/// holds one of them while it waits for a child process, a pipe, a lock or a
/// sleep takes it from every other test of the run, and the in-process client
/// and server suites, whose timeouts are a fraction of a second, starve.
///
/// Two ways in, one rule: a thread that may block is never a pool thread.
/// - `@Suite(.offThePool)` runs each of a suite's tests on threads of their
///   own (`BlockingTestExecutor`), for suites whose code blocks: the CLI
///   suites waiting on `tourpack`, the state suites on SQLite's lock and
///   PostgreSQL, the harnesses. At most `slots` such tests run at once, so
///   a 2-core machine is not asked to run a dozen builds side by side.
/// - `OffThePool.run { … }` runs one blocking call on a thread of its own
///   and resumes the caller when it returns, for a test on the pool that
///   has one thing to wait for.
///
/// The helpers that block (`Executable.run`, `Tool.run`, `RunningBuild`'s
/// waits) call `OffThePool.checkNotOnThePool()`, so a test that forgets
/// the trait fails with the reason instead of starving its neighbours.
package struct OffThePool: SuiteTrait, TestTrait, TestScoping {
    package init() {}

    package var isRecursive: Bool { true }

    /// How many `.offThePool` tests run at once: the cores, and at least two,
    /// so a build and the test waiting on it never wait for each other.
    package static let slots = max(2, ProcessInfo.processInfo.activeProcessorCount)

    private static let gate = Gate(slots)

    package func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        await Self.gate.enter()
        do {
            try await withTaskExecutorPreference(BlockingTestExecutor.shared) {
                // The preference takes effect when the task is next enqueued: now.
                await Task.yield()
                try await function()
            }
        } catch {
            await Self.gate.leave()
            throw error
        }
        await Self.gate.leave()
    }

    /// Runs `work` on a new thread and returns (or throws) what it did. A
    /// thread of its own, not a pool's: a wait may last as long as a build.
    package static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                BlockingTestExecutor.markCurrentThread()
                continuation.resume(with: Result { try work() })
            }.start()
        }
    }

    /// Records an issue when called from a task on Swift's cooperative pool:
    /// the caller is about to block a thread every other test needs. Code
    /// outside any task (a bench's main thread) and the threads above pass.
    package static func checkNotOnThePool(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard withUnsafeCurrentTask(body: { $0 != nil }), !BlockingTestExecutor.isCurrentThreadMarked else { return }
        Issue.record(
            "\(what) blocks its thread: mark the suite `@Suite(.offThePool)` or call it through `OffThePool.run`",
            sourceLocation: sourceLocation)
    }
}

extension Trait where Self == OffThePool {
    /// Runs the suite's tests on threads of their own, a few at a time, not on Swift's cooperative pool.
    package static var offThePool: Self { OffThePool() }
}

/// A task executor that never makes a job wait for a thread: a job enqueued
/// while every thread is busy (blocked, most likely) gets a new one, and a
/// thread idle for a few seconds ends. A fixed number of threads could
/// deadlock: a test blocked on its thread, waiting for a child task of its
/// own that inherited the preference and has no thread to run on.
package final class BlockingTestExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = BlockingTestExecutor()

    /// Marks the calling thread as one of ours (its Foundation thread
    /// dictionary, since Linux keeps thread names to 15 bytes).
    static func markCurrentThread() { Thread.current.threadDictionary[markKey] = true }
    static var isCurrentThreadMarked: Bool { Thread.current.threadDictionary[markKey] as? Bool == true }
    private static let markKey = "tourpack.tests.offThePool"

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var idle = 0

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.withLock {
            jobs.append(job)
            if jobs.count > idle {
                Thread { [self] in
                    Self.markCurrentThread()
                    work()
                }.start()
            } else {
                condition.signal()
            }
        }
    }

    private func work() {
        while let job = next() { job.runSynchronously(on: asUnownedTaskExecutor()) }
    }

    private func next() -> UnownedJob? {
        condition.withLock {
            while jobs.isEmpty {
                idle += 1
                let signalled = condition.wait(until: Date().addingTimeInterval(5))
                idle -= 1
                if !signalled, jobs.isEmpty { return nil }
            }
            return jobs.removeFirst()
        }
    }
}

/// At most `count` holders at a time; the others wait as tasks, holding no thread.
actor Gate {
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ count: Int) { free = count }

    func enter() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func leave() {
        if waiting.isEmpty {
            free += 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
