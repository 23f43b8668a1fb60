import Foundation
import Testing

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackPlan

@Suite struct StoreLayoutTests {
    static let tour = SafeID(validating: "0B7C2F0E-5D1A-4F55-9A0E-2F3B8F6C1D42")!
    static let poi = SafeID(validating: "5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10")!

    @Test(arguments: [
        (Phase.approaching, AudioFormat.aac, "5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10_Approaching.m4a"),
        (Phase.detailed, AudioFormat.mp3, "5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10_Detailed.mp3"),
        (Phase.guidedTour, AudioFormat.opus, "5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10_Guided Tour.opus"),
    ])
    func audioPathsAreExactlyTheAppsNames(phase: Phase, format: AudioFormat, name: String) {
        let layout = Layout(root: URL(fileURLWithPath: "/data/build/Documents"))
        let path = layout.audioFile(tourID: Self.tour, poiID: Self.poi, phase: phase, format: format)
        #expect(path.relativePath == "AudioCache/0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42/\(name)")
        #expect(path.url.path == "/data/build/Documents/AudioCache/0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42/\(name)")
        let parsed = Layout.parseAudioPath(path.relativePath)
        #expect(parsed?.tourID == Self.tour && parsed?.poiID == Self.poi && parsed?.phase == phase && parsed?.format == format)
    }

    @Test func manifestPathIsUnderOfflineTours() {
        let layout = Layout(root: URL(fileURLWithPath: "/data/out/../Documents/"))
        let id = SafeID(validating: "870b7069-dce0-5e7d-8ce0-cc4b4f306784")!
        let path = layout.manifest(packageID: id)
        #expect(path.relativePath == "OfflineTours/870b7069-dce0-5e7d-8ce0-cc4b4f306784/package.json")
        #expect(path.url.path == "/data/Documents/OfflineTours/870b7069-dce0-5e7d-8ce0-cc4b4f306784/package.json")
        #expect(layout.packageFolder(packageID: id).relativePath == "OfflineTours/870b7069-dce0-5e7d-8ce0-cc4b4f306784")
    }

    @Test(arguments: [
        "AudioCache/0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42/5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10_Guided_Tour.m4a",
        "AudioCache/0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42/5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10_GuidedTour.m4a",
        "AudioCache/0B7C2F0E-5D1A-4F55-9A0E-2F3B8F6C1D42/5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10_Detailed.m4a",
        "AudioCache/0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42/5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10_Detailed.wav",
        "AudioCache/0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42/x/5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10_Detailed.m4a",
        "OfflineTours/0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42/5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10_Detailed.m4a",
    ])
    func strayNamesAreNotAudioPaths(path: String) {
        #expect(Layout.parseAudioPath(path) == nil)
    }

    @Test(arguments: [
        "/etc/passwd", "../outside", "AudioCache/../../outside", "AudioCache//x", "./AudioCache/x", "AudioCache\\x", "", "a\u{0}b",
    ])
    func escapingPathsAreRefused(path: String) {
        let layout = Layout(root: URL(fileURLWithPath: "/data/Documents"))
        #expect(throws: TourpackError.self) { try layout.resolve(relativePath: path) }
    }

    @Test func resolvedPathsStayInsideAndSymlinksOutAreCaught() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let root = scratch.root.appendingPathComponent("Documents")
        let outside = scratch.root.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("AudioCache"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("AudioCache/escape"), withDestinationURL: outside)
        let layout = Layout(root: root)
        let inside = try layout.resolve(relativePath: "AudioCache/t/p_Detailed.m4a")
        #expect(inside.path == root.appendingPathComponent("AudioCache/t/p_Detailed.m4a").path)
        #expect(layout.contains(inside))
        #expect(!layout.contains(root))
        #expect(!layout.contains(scratch.root.appendingPathComponent("Documents-sibling/x")))
        #expect(throws: TourpackError.self) { try layout.resolve(relativePath: "AudioCache/escape/file.m4a") }
    }
}

@Suite struct StorePackageIDTests {
    static let tour = SafeID(validating: "0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42")!

    /// Expected values from Python: `uuid.uuid5(uuid.UUID(PackageID.namespace), name)`.
    @Test func matchesPythonsUUID5() {
        let local = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local)
        #expect(
            PackageID.name(tourID: Self.tour, voice: local, format: .aac)
                == #"["tourpack-package/1","0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42","local","en-us","en-US",1,0,"aac"]"#)
        #expect(PackageID.make(tourID: Self.tour, voice: local, format: .aac).value == "870b7069-dce0-5e7d-8ce0-cc4b4f306784")

        let wavenet = VoicePreset(
            provider: "google", languageCode: "en-US", name: "en-US-Wavenet-D", tier: .wavenet, speakingRate: 1.25, pitch: -2.5)
        #expect(PackageID.make(tourID: Self.tour, voice: wavenet, format: .opus).value == "c8284a42-0da1-5e44-8baf-c17f8b7688b5")
        // The namespace itself is uuid5(NAMESPACE_URL, "https://tourpack.invalid/package").
        #expect(
            PackageID.uuid5(namespace: "6ba7b811-9dad-11d1-80b4-00c04fd430c8", name: "https://tourpack.invalid/package").value
                == PackageID.namespace)
    }

    @Test func everyInputChangesIt() {
        let base = VoicePreset(
            provider: "google", languageCode: "en-US", name: "en-US-Wavenet-D", tier: .wavenet, speakingRate: 1, pitch: 0)
        let id = PackageID.make(tourID: Self.tour, voice: base, format: .aac)
        var variants: [(String, SafeID)] = []
        func add(_ label: String, _ change: (inout VoicePreset) -> Void) {
            var voice = base
            change(&voice)
            variants.append((label, PackageID.make(tourID: Self.tour, voice: voice, format: .aac)))
        }
        add("provider") { $0.provider = "openai" }
        add("name") { $0.name = "en-US-Wavenet-E" }
        add("languageCode") { $0.languageCode = "en-GB" }
        add("speakingRate") { $0.speakingRate = 1.1 }
        add("pitch") { $0.pitch = 0.5 }
        variants.append(("format", PackageID.make(tourID: Self.tour, voice: base, format: .mp3)))
        variants.append(
            ("tour", PackageID.make(tourID: SafeID(validating: "0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d43")!, voice: base, format: .aac)))
        for (label, variant) in variants {
            #expect(variant != id, "changing \(label) kept the package ID")
        }
        #expect(Set(variants.map(\.1.value)).count == variants.count)
        // Deterministic, and the tier (billing only) does not move the package.
        var otherTier = base
        otherTier.tier = .neural2
        #expect(PackageID.make(tourID: Self.tour, voice: otherTier, format: .aac) == id)
        #expect(PackageID.make(tourID: Self.tour, voice: base, format: .aac) == id)
        #expect(
            id.value.range(of: #"^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"#, options: .regularExpression)
                != nil)
    }

    @Test func fieldsCannotBleedIntoEachOther() {
        let a = VoicePreset(provider: "ab", languageCode: "en-US", name: "c", tier: .local)
        let b = VoicePreset(provider: "a", languageCode: "en-US", name: "bc", tier: .local)
        #expect(PackageID.make(tourID: Self.tour, voice: a, format: .aac) != PackageID.make(tourID: Self.tour, voice: b, format: .aac))
    }
}
