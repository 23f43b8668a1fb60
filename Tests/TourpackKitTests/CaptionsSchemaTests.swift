import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackValidate

/// An audio entry's `captions` in `schemas/package.schema.json` and in
/// validate's Swift mirror: a package that lists captions passes both, and
/// each broken field is refused by both.
@Suite(.offThePool) struct CaptionsSchemaTests {
    /// The fixture package with captions on every audio entry, as the store writes them.
    static var withCaptions: String {
        get throws {
            let audio = StoreManifestFixture.audio.map { item -> PackageAudio in
                var item = item
                let cues = [CaptionCue(start: 0, end: 1.2, text: "Near & far.")]
                item.captions = PackageCaptions(bytes: WebVTT.encode(cues), cues: 1, timing: .provider)
                return item
            }
            return String(decoding: try StoreManifestFixture.manifest(audio: audio).encoded(), as: UTF8.self)
        }
    }

    @Test("a package.json with captions passes the schema file and the mirror")
    func captionsPass() throws {
        let text = try Self.withCaptions
        #expect(
            text.contains("\"timing\": \"provider\"") && text.contains("/captions/5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10_Approaching.vtt"))
        #expect(PackageSchema.problems(in: try PackageSchemaTests.document(text)) == [])
        #expect(try StoreSchemaTests.schemaErrors(Array(text.utf8)) == [])
    }

    /// Each edit of the first entry's captions, and the start of the mirror's message; Python must refuse it too.
    @Test(arguments: [
        (
            "\"timing\": \"provider\"", "\"timing\": \"guessed\"",
            "audio[0].captions.timing: \"guessed\" is not one of \"provider\", \"estimated\""
        ),
        ("\"cues\": 1,", "", "audio[0].captions.cues: missing required field"),
        ("\"cues\": 1,", "\"cues\": -1,", "audio[0].captions.cues: -1 is less than the minimum 0"),
        ("\"cues\": 1,", "\"cues\": 1, \"language\": \"en\",", "audio[0].captions.language: unknown key"),
        ("/captions/", "/subtitles/", "audio[0].captions.path: \"OfflineTours/"),
        ("_Approaching.vtt", "_Approaching.srt", "audio[0].captions.path: \"OfflineTours/"),
        ("_Approaching.vtt", "_approaching.vtt", "audio[0].captions.path: \"OfflineTours/"),
    ])
    func captionEditsAreRefused(find: String, replace: String, message: String) throws {
        let original = try Self.withCaptions
        try #require(original.contains(find), "fixture text lacks \(find)")
        let edited = original.replacingOccurrences(of: find, with: replace, options: [], range: original.range(of: find))
        let problems = PackageSchema.problems(in: try PackageSchemaTests.document(edited))
        #expect(problems.contains { $0.hasPrefix(message) }, "\(problems)")
        #expect(!(try StoreSchemaTests.schemaErrors(Array(edited.utf8))).isEmpty, "jsonschema accepted what the mirror refuses: \(replace)")
    }

    @Test("a timing the contract does not name is refused by the decoder too")
    func unknownTimingIsNotDecoded() throws {
        let edited = try Self.withCaptions.replacingOccurrences(of: "\"timing\": \"provider\"", with: "\"timing\": \"guessed\"")
        #expect(throws: (any Error).self) { try PackageManifest.decode(Array(edited.utf8)) }
        let decoded = try PackageManifest.decode(Array(try Self.withCaptions.utf8))
        #expect(decoded.audio.allSatisfy { $0.captions?.timing == .provider && $0.captions?.cues == 1 })
    }
}
