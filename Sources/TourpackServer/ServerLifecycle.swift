/// What the embedded servers (serve-tts, serve-tiles) share about being
/// started in-process: tests and benchmarks run a body against a live port,
/// and the server stops when the body is done, however it ends.
enum ServerLifecycle {
    /// Runs `serve` in a child task, waits for its port, runs `body` with it,
    /// then cancels the server and waits for it to finish.
    ///
    /// - Parameters:
    ///   - name: how errors name the server (`serve-tts`).
    ///   - serve: the server's `run(onReady:)`.
    static func withRunning<T>(
        name: String, serve: @escaping @Sendable (@escaping @Sendable (Int) async -> Void) async throws -> Void,
        _ body: (Int) async throws -> T
    ) async throws -> T {
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { portSink.finish() }
                try await serve { port in portSink.yield(port) }
            }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else {
                try await group.next()  // surfaces the reason it stopped (e.g. the port is taken)
                throw ServerStartError(message: "\(name) stopped before it was listening")
            }
            do {
                let result = try await body(port)
                group.cancelAll()
                try? await group.waitForAll()
                return result
            } catch {
                group.cancelAll()
                try? await group.waitForAll()
                throw error
            }
        }
    }
}
