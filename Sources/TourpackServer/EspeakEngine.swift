import CEspeakNG
import Foundation
import NIOPosix
import TourpackAudio

/// One espeak-ng voice, as `GET /v1/voices` lists it.
struct EspeakVoice: Sendable, Hashable {
    /// The voice file's path under espeak-ng-data/voices, e.g. `gmw/en-US`; unique.
    var identifier: String
    var name: String
    /// Language tags, most preferred first, lowercased as espeak spells them (`en-us`).
    var languages: [String]
    /// 0 none, 1 male, 2 female.
    var gender: Int
}

/// What to say and how, in espeak's own units.
struct EspeakUtterance: Sendable {
    var text: String
    var isSSML: Bool
    var voice: EspeakVoice
    /// Words per minute, 80...450.
    var wordsPerMinute: Int
    /// 0...100, 50 is the voice's normal pitch.
    var pitch: Int
}

/// One of espeak-ng's synthesis events, copied out of the callback.
///
/// `textPosition` is espeak's own: 1-based, counting Unicode scalars of the
/// UTF-8 input (`espeakCHARS_UTF8`), SSML tags included. `sample` counts
/// samples at espeak's native rate from the start of the utterance: the
/// event's place in the returned audio, which the tests check against the
/// pauses heard in it.
struct EspeakEvent: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        /// A sentence begins (espeakEVENT_SENTENCE).
        case sentence
        /// A word begins (espeakEVENT_WORD); `length` is its length in scalars.
        case word
        /// An SSML `<mark>` is reached (espeakEVENT_MARK); `name` is its
        /// `name` attribute exactly as written, entities not decoded.
        case mark
        /// A sentence's speech (with its pause) ends (espeakEVENT_END).
        case end
    }
    var kind: Kind
    var textPosition: Int
    var length: Int
    var sample: Int
    var name: String?
}

/// An utterance's audio at espeak's native rate and the events met while speaking it.
struct EspeakSpeech: Sendable {
    var pcm: PCMAudio
    var events: [EspeakEvent]
}

/// The single owner of libespeak-ng, whose state is global to the process.
///
/// Every call (initialize, voice list, parameters, synthesis) runs on one
/// dedicated thread of a private `NIOThreadPool`, so calls are serialized
/// and the cooperative pool and the event loops never block on espeak.
/// There is one per process (`shared`); several servers in one process share it.
final class EspeakEngine: @unchecked Sendable {
    static let shared = EspeakEngine()

    private let thread: NIOThreadPool
    // Touched only on `thread`:
    private var sampleRate = 0
    private var voices: [EspeakVoice] = []

    private init() {
        thread = NIOThreadPool(numberOfThreads: 1)
        thread.start()
    }

    deinit {
        // Only reached if `shared` ever goes away; the thread owns espeak's state.
        try? thread.syncShutdownGracefully()
        espeak_Terminate()
    }

    /// The installed voices, sorted by identifier.
    func listVoices() async throws -> [EspeakVoice] {
        try await thread.runIfActive { [self] in
            try initializeIfNeeded()
            return voices
        }
    }

    /// Speaks `utterance`; the PCM is at espeak's native rate (22050 Hz).
    func speak(_ utterance: EspeakUtterance) async throws -> PCMAudio {
        try await speakWithEvents(utterance).pcm
    }

    /// Speaks `utterance` and keeps espeak's sentence, word, mark and end
    /// events, each placed by its sample in the returned audio.
    func speakWithEvents(_ utterance: EspeakUtterance) async throws -> EspeakSpeech {
        try await thread.runIfActive { [self] in
            try initializeIfNeeded()
            return try speakOnThread(utterance)
        }
    }

    private func initializeIfNeeded() throws {
        guard sampleRate == 0 else { return }
        let rate = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, nil, 0)
        guard rate > 0 else { throw EspeakFailure(message: "espeak-ng could not initialize (is espeak-ng-data installed?)") }
        espeak_SetSynthCallback(espeakReceiveSamples)
        sampleRate = Int(rate)
        voices = Self.readVoices().sorted { $0.identifier < $1.identifier }
    }

    private static func readVoices() -> [EspeakVoice] {
        guard var cursor = espeak_ListVoices(nil) else { return [] }
        var result: [EspeakVoice] = []
        while let voice = cursor.pointee {
            let entry = voice.pointee
            var languages: [String] = []
            if var bytes = UnsafeRawPointer(entry.languages)?.assumingMemoryBound(to: CChar.self) {
                // Pairs of (priority byte, NUL-terminated tag), ended by a zero priority.
                while bytes.pointee != 0 {
                    let tag = String(cString: bytes + 1)
                    languages.append(tag.lowercased())
                    bytes += tag.utf8.count + 2
                }
            }
            let identifier = entry.identifier.map { String(cString: $0) } ?? ""
            let name = entry.name.map { String(cString: $0) } ?? identifier
            if !identifier.isEmpty {
                result.append(EspeakVoice(identifier: identifier, name: name, languages: languages, gender: Int(entry.gender)))
            }
            cursor += 1
        }
        return result
    }

    private func speakOnThread(_ utterance: EspeakUtterance) throws -> EspeakSpeech {
        let selected = utterance.voice.identifier.withCString { espeak_SetVoiceByName($0) }
        guard selected == EE_OK else { throw EspeakFailure(message: "espeak-ng has no voice \(utterance.voice.identifier)") }
        espeak_SetParameter(espeakRATE, Int32(min(max(utterance.wordsPerMinute, 80), 450)), 0)
        espeak_SetParameter(espeakPITCH, Int32(min(max(utterance.pitch, 0), 100)), 0)
        let sink = SampleSink()
        var flags = UInt32(espeakCHARS_UTF8)
        if utterance.isSSML { flags |= UInt32(espeakSSML) }
        let status = utterance.text.withCString { text in
            espeak_Synth(text, strlen(text) + 1, 0, POS_CHARACTER, 0, flags, nil, Unmanaged.passUnretained(sink).toOpaque())
        }
        guard status == EE_OK else { throw EspeakFailure(message: "espeak_Synth failed (\(status.rawValue))") }
        espeak_Synchronize()
        return EspeakSpeech(pcm: PCMAudio(samples: sink.samples, sampleRate: sampleRate), events: sink.events)
    }
}

struct EspeakFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// Collects the samples and events of one `espeak_Synth` call; passed as its user data.
private final class SampleSink {
    var samples: [Int16] = []
    var events: [EspeakEvent] = []
}

/// espeak's synth callback: append this block's samples and events to the
/// call's sink. The event list ends with espeakEVENT_LIST_TERMINATED and
/// comes even with no samples (the last call has none); a mark's name
/// points into espeak's buffers, so it is copied here.
private func espeakReceiveSamples(_ wav: UnsafeMutablePointer<Int16>?, _ count: Int32, _ events: UnsafeMutablePointer<espeak_EVENT>?)
    -> Int32
{
    guard let events, let user = events.pointee.user_data else { return 0 }
    let sink = Unmanaged<SampleSink>.fromOpaque(user).takeUnretainedValue()
    var event = events
    while event.pointee.type != espeakEVENT_LIST_TERMINATED {
        let raw = event.pointee
        let kind: EspeakEvent.Kind? =
            switch raw.type {
            case espeakEVENT_SENTENCE: .sentence
            case espeakEVENT_WORD: .word
            case espeakEVENT_MARK: .mark
            case espeakEVENT_END: .end
            default: nil
            }
        if let kind {
            let name = kind == .mark ? raw.id.name.map { String(cString: $0) } : nil
            sink.events.append(
                EspeakEvent(kind: kind, textPosition: Int(raw.text_position), length: Int(raw.length), sample: Int(raw.sample), name: name))
        }
        event += 1
    }
    if let wav, count > 0 { sink.samples.append(contentsOf: UnsafeBufferPointer(start: wav, count: Int(count))) }
    return 0  // 0: keep going
}
