import Foundation
import Testing
import TourpackTesting

/// What an app that imports `TourpackClient` alone can name: the library's
/// API compiles; the pipeline's types (exit codes, atomic files, pricing
/// tiers, the engine's error and phase) do not. Each snippet is type-checked
/// by `swiftc` against the modules this build made, as a separate app's
/// source would be.
@Suite(.offThePool) struct OutsideAppTests {
    static func typecheck(_ source: String) throws -> Tool.Result {
        let folder = TemporaryFolder.path("tourpack-outside-app")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { TemporaryFolder.remove(folder) }
        let file = folder.appendingPathComponent("App.swift")
        try Data(source.utf8).write(to: file)
        let modules = Executable.productsFolder.appendingPathComponent("Modules")
        return try Tool.run("swiftc", ["-typecheck", "-swift-version", "6", "-I", modules.path, file.path])
    }

    @Test func theLibrarysAPICompilesInAnAppOfItsOwn() throws {
        let result = try Self.typecheck(
            """
            import Foundation
            import TourpackClient

            func screen(_ library: OfflineLibrary, tour: UUID) async throws {
                let format: AudioFormat = .aac
                for try await job in library.download(tourId: tour, format: format, quality: .high, allowsCellular: true) {
                    if job.status == .waiting, job.waitReason == .forWiFi { print(job.tourId) }
                }
                switch await library.state(of: tour) {
                case .waiting(_, let reason): _ = reason == WaitReason.lowDataMode
                case .failed(_, let error): _ = error.recoverySuggestion
                default: break
                }
                _ = await library.resumeDownloads()
                _ = NetworkPath(isSatisfied: true, interface: .cellular, isExpensive: true, isConstrained: false)
            }
            """)
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test(arguments: ["ExitStatus.ok", "AtomicFile.self", "PricingTier.self", "TourpackError.self", "Phase.detailed"])
    func thePipelinesTypesAreNotAnAppsToName(_ expression: String) throws {
        let result = try Self.typecheck("import TourpackClient\nlet named = \(expression)\n")
        #expect(result.status != 0, "an app importing TourpackClient names \(expression)")
        let name = String(expression.prefix { $0 != "." })
        #expect(result.stderr.contains("cannot find '\(name)' in scope"), "\(result.stderr)")
    }
}
