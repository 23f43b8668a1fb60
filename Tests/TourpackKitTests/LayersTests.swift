import Foundation
import Testing

@testable import TourpackAudio
@testable import TourpackCore
@testable import TourpackKit

@Suite struct LayersTests {
    @Test func safeIDAcceptsOnlyCanonicalUUIDs() {
        #expect(SafeID(validating: "0B7C2F0E-5D1A-4F55-9A0E-2F3B8F6C1D42")?.value == "0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42")
        #expect(SafeID(validating: "../../etc/passwd") == nil)
        #expect(SafeID(validating: "0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d4") == nil)
        #expect(SafeID(validating: "0b7c2f0e/5d1a-4f55-9a0e-2f3b8f6c1d42") == nil)
    }

    @Test func phaseFileLabelsAreTheAppsSpelling() {
        #expect(Phase.allCases.map(\.fileLabel) == ["Approaching", "Detailed", "Guided Tour"])
    }
}

@Suite struct PCMResamplerTests {
    @Test func resamplingKeepsDurationAndTone() throws {
        // One second of a 440 Hz tone at 22050 Hz, as espeak-ng produces.
        let input = (0..<22_050).map { Int16(10_000 * sin(2 * Double.pi * 440 * Double($0) / 22_050)) }
        let pcm = PCMAudio(samples: input, sampleRate: 22_050)
        let out = try pcm.resampled(to: 48_000)
        #expect(out.sampleRate == 48_000)
        #expect(abs(out.durationSeconds - 1.0) < 0.002)
        // The peak survives resampling (no silence, no clipping).
        let peak = out.samples.map { abs(Int($0)) }.max() ?? 0
        #expect(peak > 9_000 && peak < 11_000)
    }
}

@Suite struct WAVTests {
    @Test func roundTrips() throws {
        let pcm = PCMAudio(samples: [0, 1, -1, .max, .min, 1234], sampleRate: 24_000)
        let bytes = WAV.encode(pcm)
        #expect(bytes.count == 44 + 12)
        #expect(try WAV.decode(bytes) == pcm)
    }

    @Test func truncatedBodyIsReported() {
        let bytes = WAV.encode(PCMAudio(samples: Array(repeating: 7, count: 100), sampleRate: 24_000))
        #expect(throws: WAV.DecodeError.truncated(expectedBytes: 200, actualBytes: 150)) {
            try WAV.decode(Array(bytes.dropLast(50)))
        }
    }

    @Test func garbageIsNotRIFF() {
        #expect(throws: WAV.DecodeError.notRIFF) { try WAV.decode(Array("<html>oops</html>".utf8)) }
    }
}

@Suite struct NarrationTests {
    @Test func ssmlIsRecognisedWithOrWithoutAnXMLDeclaration() {
        #expect(Narration(text: "  <speak>Hi</speak>").isSSML)
        #expect(Narration(text: "<?xml version=\"1.0\"?>\n<speak>Hi</speak>").isSSML)
        #expect(!Narration(text: "Use <speak> tags, she said.").isSSML)
        #expect(!Narration(text: "<?xml version=\"1.0\"?> plain").isSSML)
    }
}
