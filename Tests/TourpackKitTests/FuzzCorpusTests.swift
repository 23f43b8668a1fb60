import Foundation
import Testing
import TourpackFuzz
import TourpackTesting

/// Every input in `Fuzz/Corpus` (the seeds, and each crash input once its
/// fix landed) through its fuzz target's body, in the ordinary build: a
/// parser that crashes, traps or breaks a target's property on one of them
/// fails `swift test`, sanitizers or not.
@Suite(.offThePool) struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus", isDirectory: true)

    @Test("every target has a seed corpus, and every corpus folder names a target")
    func corporaMatchTheTargets() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.path).filter { !$0.hasPrefix(".") }
        #expect(Set(folders) == Set(FuzzHarness.targets.map(\.name)))
        for target in FuzzHarness.targets {
            let inputs = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.appendingPathComponent(target.name).path)
            #expect(!inputs.isEmpty, "\(target.name) has no seeds")
        }
    }

    @Test("each target's corpus runs through it without a crash or a broken property", arguments: FuzzHarness.targets.map(\.name))
    func corpusReplays(_ name: String) throws {
        let run = try #require(FuzzHarness.targets.first { $0.name == name }?.run)
        let folder = Self.corpus.appendingPathComponent(name, isDirectory: true)
        let inputs = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        for input in inputs {
            run(Array(try Data(contentsOf: folder.appendingPathComponent(input))))
        }
    }
}
