import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A child process of a bench: `posix_spawn` with its output in files, then
/// `wait4`, so the peak RSS and CPU a bench reports are the child's alone.
/// Blocking; benches that wait from async code call `wait` on a thread of
/// their own.
enum Child {
    /// Starts `path` with stdout to the file `stdout` and stderr to `stderr`; the child's pid.
    static func launch(_ path: String, _ arguments: [String], stdout: String, stderr: String = "/dev/null") throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard spawned == 0 else { throw BenchFailure("could not start \(path): errno \(spawned)") }
        return pid
    }

    /// Waits for the child: its exit status (128 + the signal when killed)
    /// and its peak resident memory in KiB.
    static func wait(_ pid: pid_t) throws -> (status: Int32, peakKB: Int) {
        let waited = try waitCounting(pid)
        return (waited.status, waited.peakKB)
    }

    /// `wait`, with the child's CPU time (user + system), which a loaded machine changes far less than wall time.
    static func waitCounting(_ pid: pid_t) throws -> (status: Int32, peakKB: Int, cpuSeconds: Double) {
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) != pid {
            guard errno == EINTR else { throw BenchFailure("wait4 failed: errno \(errno)") }
        }
        let cpu = [usage.ru_utime, usage.ru_stime].reduce(0.0) { $0 + Double($1.tv_sec) + Double($1.tv_usec) / 1e6 }
        return ((status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f), Int(usage.ru_maxrss), cpu)
    }

    /// Starts the child and waits for it.
    static func run(_ path: String, _ arguments: [String], stdout: String) throws -> (status: Int32, peakKB: Int) {
        try wait(launch(path, arguments, stdout: stdout))
    }

    /// `run`, with the child's CPU time.
    static func runCounting(_ path: String, _ arguments: [String], stdout: String, stderr: String = "/dev/null") throws -> (
        status: Int32, peakKB: Int, cpuSeconds: Double
    ) {
        try waitCounting(launch(path, arguments, stdout: stdout, stderr: stderr))
    }
}
