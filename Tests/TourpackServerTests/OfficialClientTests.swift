import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackServer
import TourpackTesting

/// serve-tts as the services' own client libraries see it: Google's
/// `google-cloud-texttospeech` (REST transport) and `openai`, run by
/// python3 from `Clients/` against an in-process server. Each file they
/// save is then checked with ffprobe and by reading its header.
///
/// `make setup-test` installs both libraries from PyPI; when they cannot be
/// imported these tests fail and say so, they never skip.
@Suite(.serialized) struct OfficialClientTests {
    // MARK: Google

    @Test func googleClientSpeaksEveryEncoding() async throws {
        let folder = try TemporaryFolder.make("tourpack-clients")
        defer { TemporaryFolder.remove(folder) }
        try await withServer { port, _ in try await Self.runClient("google_client.py", port: port, outdir: folder) }
        let manifest = try Self.manifest(in: folder)

        let voices = try #require(manifest["voices"] as? [[String: Any]])
        #expect(!voices.isEmpty)
        #expect(voices.allSatisfy { ($0["languageCodes"] as? [String])?.contains { $0.hasPrefix("en") } == true })

        // file → (ffprobe codec, sample rate, WAV format code if a WAV)
        let expected: [String: (codec: String, rate: Int, wavCode: Int?)] = [
            "google-LINEAR16-default.wav": ("pcm_s16le", 24_000, 1),
            "google-LINEAR16-16000.wav": ("pcm_s16le", 16_000, 1),
            "google-MP3-default.mp3": ("mp3", 24_000, nil),
            "google-MP3-22050.mp3": ("mp3", 22_050, nil),
            "google-OGG_OPUS-default.opus": ("opus", 24_000, nil),
            "google-OGG_OPUS-48000.opus": ("opus", 48_000, nil),
            "google-MULAW-8000.wav": ("pcm_mulaw", 8_000, 7),
            "google-ALAW-8000.wav": ("pcm_alaw", 8_000, 6),
            "google-MULAW-default.wav": ("pcm_mulaw", 24_000, 7),
            "google-M4A-default.m4a": ("aac", 24_000, nil),
        ]
        let files = try #require(manifest["files"] as? [[String: Any]]).compactMap { $0["file"] as? String }
        #expect(Set(files).isSuperset(of: expected.keys), "the client saved \(files)")
        for (file, want) in expected.sorted(by: { $0.key < $1.key }) {
            try await Self.checkAudio(folder.appendingPathComponent(file), codec: want.codec, rate: want.rate, wavCode: want.wavCode)
        }
        let mp3 = try await Self.probe(folder.appendingPathComponent("google-MP3-default.mp3"))
        #expect(mp3.bitRate == 32_000, "Google's MP3 is 32 kbps")

        // PCM is LINEAR16 without its header: no RIFF, and as long as the
        // WAV's samples (espeak's pitch flutter keeps the bytes from matching).
        let linear16 = try WAV.decode(Array(try Data(contentsOf: folder.appendingPathComponent("google-LINEAR16-default.wav"))))
        let pcm = try Data(contentsOf: folder.appendingPathComponent("google-PCM-default.pcm"))
        Self.checkRawPCM(pcm, against: linear16)

        // A two-second <break> lengthens the same sentences by about two seconds.
        let plain = try WAV.decode(Array(try Data(contentsOf: folder.appendingPathComponent("google-ssml-plain.wav"))))
        let paused = try WAV.decode(Array(try Data(contentsOf: folder.appendingPathComponent("google-ssml-break.wav"))))
        #expect(
            paused.durationSeconds - plain.durationSeconds > 1.5, "break: \(paused.durationSeconds) s, none: \(plain.durationSeconds) s")

        let refusals = try #require(manifest["refusals"] as? [[String: Any]])
        #expect(refusals.map { $0["refused"] as? String } == ["6000-byte input", "AUDIO_ENCODING_UNSPECIFIED", "OGG_OPUS at 44100 Hz"])
        #expect(refusals.allSatisfy { $0["status"] as? String == "INVALID_ARGUMENT" && $0["code"] as? Int == 400 })
    }

    // MARK: OpenAI

    @Test func openAIClientSpeaksEveryFormat() async throws {
        let folder = try TemporaryFolder.make("tourpack-clients")
        defer { TemporaryFolder.remove(folder) }
        try await withServer { port, _ in try await Self.runClient("openai_client.py", port: port, outdir: folder) }
        let manifest = try Self.manifest(in: folder)

        let entries = try #require(manifest["files"] as? [[String: Any]])
        let contentTypes = Dictionary(
            entries.compactMap { entry in
                (entry["file"] as? String).map { ($0, entry["contentType"] as? String ?? "") }
            }, uniquingKeysWith: { first, _ in first })
        let expected: [String: (codec: String, container: String, contentType: String, wavCode: Int?)] = [
            "openai-mp3.mp3": ("mp3", "mp3", "audio/mpeg", nil),
            "openai-opus.opus": ("opus", "ogg", "audio/opus", nil),
            "openai-aac.aac": ("aac", "aac", "audio/aac", nil),  // ffprobe's ADTS demuxer is "aac"
            "openai-flac.flac": ("flac", "flac", "audio/flac", nil),
            "openai-wav.wav": ("pcm_s16le", "wav", "audio/wav", 1),
            "openai-default.bin": ("mp3", "mp3", "audio/mpeg", nil),  // no response_format means mp3
        ]
        #expect(Set(contentTypes.keys).isSuperset(of: expected.keys), "the client saved \(contentTypes.keys.sorted())")
        for (file, want) in expected.sorted(by: { $0.key < $1.key }) {
            let url = folder.appendingPathComponent(file)
            try await Self.checkAudio(url, codec: want.codec, rate: 24_000, wavCode: want.wavCode)
            #expect(try await Self.probe(url).container.split(separator: ",").contains { $0 == want.container }, "\(file) container")
            #expect(contentTypes[file] == want.contentType, "\(file) Content-Type")
        }
        let aac = try await Self.probe(folder.appendingPathComponent("openai-aac.aac"))
        #expect(aac.profile == "LC")

        // pcm is wav without its header.
        let wav = try WAV.decode(Array(try Data(contentsOf: folder.appendingPathComponent("openai-wav.wav"))))
        let pcm = try Data(contentsOf: folder.appendingPathComponent("openai-pcm.pcm"))
        Self.checkRawPCM(pcm, against: wav)
        #expect(contentTypes["openai-pcm.pcm"] == "audio/pcm")

        let normal = try WAV.decode(Array(try Data(contentsOf: folder.appendingPathComponent("openai-speed-1.0.wav"))))
        let fast = try WAV.decode(Array(try Data(contentsOf: folder.appendingPathComponent("openai-speed-2.0.wav"))))
        #expect(
            fast.durationSeconds < normal.durationSeconds * 0.75, "speed 2: \(fast.durationSeconds) s, speed 1: \(normal.durationSeconds) s"
        )

        let refusals = try #require(manifest["refusals"] as? [[String: Any]])
        #expect(refusals.map { $0["refused"] as? String } == ["6000-byte input", "response_format ogg", "speed 5"])
        #expect(refusals.allSatisfy { $0["exception"] as? String == "BadRequestError" && $0["type"] as? String == "invalid_request_error" })
    }

    // MARK: Checks

    /// One mono audio stream of `codec` at `rate`, lasting more than half a
    /// second; Opus's rate is the one its OpusHead records (ffprobe always
    /// says 48000, the rate Opus decodes at). WAVs also have their format
    /// code checked in the `fmt ` chunk.
    static func checkAudio(
        _ url: URL, codec: String, rate: Int, wavCode: Int?, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let file = url.lastPathComponent
        let probe = try await probe(url)
        #expect(probe.codec == codec, "\(file) codec", sourceLocation: sourceLocation)
        #expect(probe.channels == 1, "\(file) is mono", sourceLocation: sourceLocation)
        #expect(probe.duration > 0.5, "\(file) lasts \(probe.duration) s", sourceLocation: sourceLocation)
        let bytes = [UInt8](try Data(contentsOf: url))
        if codec == "opus" {
            let head = try #require(opusHead(bytes), "\(file) has an OpusHead", sourceLocation: sourceLocation)
            #expect(head.channels == 1 && head.inputRate == rate, "\(file) OpusHead \(head)", sourceLocation: sourceLocation)
        } else {
            #expect(probe.rate == rate, "\(file) sample rate", sourceLocation: sourceLocation)
        }
        if let wavCode {
            let format = try #require(wavFormat(bytes), "\(file) has a RIFF/WAVE fmt chunk", sourceLocation: sourceLocation)
            #expect(
                format.code == wavCode && format.rate == rate && format.channels == 1, "\(file) fmt \(format)",
                sourceLocation: sourceLocation)
            #expect(format.bits == (wavCode == 1 ? 16 : 8), "\(file) bits per sample", sourceLocation: sourceLocation)
        }
    }

    /// Headerless s16le at 24 kHz: an even byte count, no RIFF, speech (not
    /// silence), and within 2% of the length of the same text as a WAV.
    static func checkRawPCM(_ pcm: Data, against wav: PCMAudio, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(wav.sampleRate == 24_000, sourceLocation: sourceLocation)
        #expect(pcm.count % 2 == 0 && !pcm.starts(with: Data("RIFF".utf8)), sourceLocation: sourceLocation)
        let samples = pcm.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }.map { Int16(littleEndian: $0) }
        let seconds = Double(samples.count) / 24_000
        #expect(
            abs(seconds - wav.durationSeconds) < wav.durationSeconds * 0.02, "pcm \(seconds) s, wav \(wav.durationSeconds) s",
            sourceLocation: sourceLocation)
        #expect(rms(PCMAudio(samples: samples, sampleRate: 24_000)) > 100, "speech, not silence", sourceLocation: sourceLocation)
    }

    struct Probe {
        var codec: String, rate: Int, channels: Int, duration: Double, bitRate: Int, profile: String, container: String
    }

    /// ffprobe's view of the file's only audio stream.
    static func probe(_ url: URL) async throws -> Probe {
        let result = try await Tool.runOffThePool("ffprobe", ["-v", "error", "-of", "json", "-show_streams", "-show_format", url.path])
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            let streams = object["streams"] as? [[String: Any]], streams.count == 1,
            let format = object["format"] as? [String: Any]
        else { throw ToolFailure(message: "ffprobe \(url.lastPathComponent): status \(result.status), \(result.stderr)\(result.stdout)") }
        let stream = streams[0]
        let duration = Double(stream["duration"] as? String ?? "") ?? Double(format["duration"] as? String ?? "") ?? 0
        return Probe(
            codec: stream["codec_name"] as? String ?? "", rate: Int(stream["sample_rate"] as? String ?? "") ?? 0,
            channels: stream["channels"] as? Int ?? 0, duration: duration, bitRate: Int(stream["bit_rate"] as? String ?? "") ?? 0,
            profile: stream["profile"] as? String ?? "", container: format["format_name"] as? String ?? "")
    }

    /// The `fmt ` chunk of a RIFF/WAVE file: format code (1 PCM, 6 A-law, 7 µ-law), rate, channels, bits.
    static func wavFormat(_ bytes: [UInt8]) -> (code: Int, rate: Int, channels: Int, bits: Int)? {
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        guard bytes.count >= 12, bytes[0..<4].elementsEqual("RIFF".utf8), bytes[8..<12].elementsEqual("WAVE".utf8) else { return nil }
        var offset = 12
        while offset + 8 <= bytes.count {
            let size = u32(offset + 4)
            if bytes[offset..<offset + 4].elementsEqual("fmt ".utf8), size >= 16, offset + 24 <= bytes.count {
                let body = offset + 8
                return (u16(body), u32(body + 4), u16(body + 2), u16(body + 14))
            }
            offset += 8 + size + (size & 1)
        }
        return nil
    }

    /// The channel count and input sample rate from an Ogg Opus file's
    /// identification header (RFC 7845 §5.1): "OpusHead", version, channels,
    /// pre-skip, then the rate as a little-endian 32-bit integer.
    static func opusHead(_ bytes: [UInt8]) -> (channels: Int, inputRate: Int)? {
        let magic = Array("OpusHead".utf8)
        guard bytes.count >= 19,
            let start = (0...(bytes.count - 19)).first(where: { bytes[$0..<$0 + 8].elementsEqual(magic) })
        else { return nil }
        let rate = (0..<4).reduce(0) { $0 | Int(bytes[start + 12 + $1]) << (8 * $1) }
        return (Int(bytes[start + 9]), rate)
    }

    // MARK: Running the clients

    struct ToolFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    static func manifest(in folder: URL) throws -> [String: Any] {
        let data = try Data(contentsOf: folder.appendingPathComponent("manifest.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The Python import names of the client libraries and the PyPI packages that provide them.
    static let libraries = [
        "google_client.py": ("google.cloud.texttospeech", "google-cloud-texttospeech"), "openai_client.py": ("openai", "openai"),
        "polly_client.py": ("boto3", "boto3"), "elevenlabs_client.py": ("elevenlabs", "elevenlabs"),
        // It needs boto3 and elevenlabs too; this is the one most often missing.
        "timing_client.py": ("google.cloud.texttospeech_v1beta1", "google-cloud-texttospeech"),
    ]

    /// Runs `python3 Clients/<script> <port> <outdir>` without blocking a
    /// cooperative thread (the server under test needs them) and throws,
    /// with the script's output, unless it exits 0.
    static func runClient(_ script: String, port: Int, outdir: URL, arguments: [String] = []) async throws {
        let clients = try #require(Bundle.module.url(forResource: "Clients", withExtension: nil), "the Clients resource folder")
        if let (module, package) = libraries[script] {
            let check = try await Tool.runOffThePool("python3", ["-c", "import \(module)"])
            guard check.status == 0 else {
                throw ToolFailure(
                    message: """
                        python3 cannot import \(module), so \(script) cannot run. Install it with `make setup-test` \
                        (or `python3 -m pip install \(package)`); PyPI must be reachable. \(check.stderr)
                        """)
            }
        }
        let result = try await Tool.runOffThePool(
            "python3", [clients.appendingPathComponent(script).path, String(port), outdir.path] + arguments)
        guard result.status == 0 else {
            throw ToolFailure(message: "\(script) exited \(result.status):\n\(result.stderr)\(result.stdout)")
        }
    }

}
