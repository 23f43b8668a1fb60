import Foundation
import Testing

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackLoad
@testable import TourpackPlan

/// `formats` as a quality ladder: each rung a format at a bit rate under a
/// quality, checked against what its codec can carry, and split into one
/// Documents root per quality.
@Suite struct QualityLadderConfigTests {
    static let minimal = PipelineConfigTests.minimal + "output: ../out/Documents\nstate: ../out/state\n"

    @Test func aLadderSplitsIntoOneRootPerQualityInTheOrderItIsWritten() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let config = try fixture.load(
            Self.minimal
                + "formats: [aac, {format: opus, bitrateKbps: 32, quality: low}, {format: opus, bitrateKbps: 64, quality: medium}, mp3]\n")
        #expect(
            config.ladder == [
                AudioVariant(.aac), AudioVariant(.opus, bitrateKbps: 32, quality: .low),
                AudioVariant(.opus, bitrateKbps: 64, quality: .medium),
                AudioVariant(.mp3),
            ])
        let roots = config.qualityRoots()
        let out = fixture.root.standardizedFileURL.appendingPathComponent("out")
        #expect(roots.map(\.quality) == [.high, .low, .medium])
        #expect(roots.map(\.output.lastPathComponent) == ["Documents", "Documents-low", "Documents-medium"])
        #expect(roots.allSatisfy { $0.output.deletingLastPathComponent().path == out.path })
        #expect(roots.map(\.formats) == [[.aac, .mp3], [.opus], [.opus]])
        #expect(roots.map { $0.formats.map($0.bitrate(for:)) } == [[128, 192], [32], [64]])
        // The loaded configuration is the first root, and any root gives the same split.
        #expect(config == roots[0])
        #expect(roots[2].qualityRoots().map(\.output) == roots.map(\.output))
    }

    @Test func aPlainListIsOneHighRootAtTheContractsRates() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let config = try fixture.load(Self.minimal + "formats: [aac, opus]\n")
        #expect(config.qualityRoots() == [config])
        #expect(config.quality == .high && config.audio.bitrates.isEmpty)
        #expect(config.formats.map(config.bitrate(for:)) == [128, 96])
        #expect(!config.settledDescription().contains("quality"))
        // --format replaces the ladder with plain formats.
        var overrides = PipelineOverrides()
        overrides.formats = [.mp3]
        let overridden = try fixture.load(Self.minimal + "formats: [{format: opus, bitrateKbps: 32, quality: low}]\n", overrides: overrides)
        #expect(overridden.ladder == [AudioVariant(.mp3)] && overridden.qualityRoots().count == 1)
    }

    @Test func ratesACodecCannotCarryAndClashingRungsAreRefusedWithTheirPath() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let errors = fixture.errors(
            Self.minimal + """
                formats:
                  - aac
                  - {format: mp3, bitrateKbps: 100, quality: low}
                  - {format: aac, bitrateKbps: 160, quality: medium}
                  - {format: opus, bitrateKbps: 600, quality: low}
                  - {format: opus, bitrateKbps: 24}
                  - opus
                  - {format: aac, bitrateKbps: 128, quality: low}
                  - {format: flac}
                  - {quality: best, bitrateKbps: 32}
                  - {format: mp3, bitrate: 32}

                """)
        #expect(
            errors == [
                "pipelines/p.yaml: formats[5]: opus is already offered as high by formats[4]; give each rate of a format its own quality (high, medium, low)",
                "pipelines/p.yaml: formats[6]: aac at 128 kbps is already formats[0]",
                "pipelines/p.yaml: formats[7].format: 'flac' is not one of aac, mp3, opus",
                "pipelines/p.yaml: formats[8].format: missing required field",
                "pipelines/p.yaml: formats[9].bitrate: unknown key; expected one of format, bitrateKbps, quality",
                "pipelines/p.yaml: formats[1].bitrateKbps: mp3 cannot be 100 kbps; MPEG-1 Layer III takes 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320",
                "pipelines/p.yaml: formats[2].bitrateKbps: aac at 24000 Hz takes 8 to 144 kbps (AAC-LC carries at most 6,144 bits per frame of one channel), not 160",
                "pipelines/p.yaml: formats[3].bitrateKbps: opus takes 6 to 510 kbps, not 600",
            ], "\(errors)")
        // At 48 kHz, AAC carries 160 kbps.
        let config = try fixture.load(
            Self.minimal + "formats: [aac, {format: aac, bitrateKbps: 160, quality: medium}]\naudio: {sampleRateHz: {aac: 48000}}\n")
        #expect(config.qualityRoots()[1].bitrate(for: .aac) == 160)
    }

    @Test func onlyAnotherRateGivesAnotherPackageID() throws {
        let tour = SafeID(validating: "6f2d1c3e-8a41-4b7e-9c55-1d2e3f4a5b60")!
        let voice = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local, speakingRate: 1, pitch: 0)
        let contract = PackageID.make(tourID: tour, voice: voice, format: .opus)
        #expect(PackageID.make(tourID: tour, voice: voice, format: .opus, bitrateKbps: 96) == contract)
        let low = PackageID.make(tourID: tour, voice: voice, format: .opus, bitrateKbps: 32)
        #expect(low != contract && low != PackageID.make(tourID: tour, voice: voice, format: .opus, bitrateKbps: 64))
        // Python: uuid.uuid5(uuid.UUID(PackageID.namespace), name).
        #expect(
            PackageID.name(tourID: tour, voice: voice, format: .opus, bitrateKbps: 32)
                == #"["tourpack-package/1","6f2d1c3e-8a41-4b7e-9c55-1d2e3f4a5b60","local","en-us","en-US",1,0,"opus",32]"#)
        #expect(low.value == "f09764d0-6a48-57a8-b2c3-c7571a1052f3")
    }
}
