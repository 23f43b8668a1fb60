import Foundation
import NIOPosix
import TourpackAudio

/// Turns an API request's voice and prosody into espeak terms, speaks, and
/// resamples to the rate asked for. Shared by the Google and OpenAI routes.
struct LocalVoice: Sendable {
    let engine = EspeakEngine.shared

    /// The voice for `name` (an espeak identifier like `gmw/en-US`, its last
    /// part `en-US`, or an espeak voice name) or else for `languageCode`
    /// (`en-US`, then just `en`). Nil when espeak speaks neither.
    func resolve(name: String?, languageCode: String?) async throws -> EspeakVoice? {
        let voices = try await engine.listVoices()
        if let name = name?.lowercased(), !name.isEmpty {
            let byName = voices.first {
                $0.identifier.lowercased() == name || $0.name.lowercased() == name
                    || $0.identifier.split(separator: "/").last.map { $0.lowercased() == name } == true
            }
            if let byName { return byName }
        }
        guard let code = languageCode?.lowercased().replacingOccurrences(of: "_", with: "-"), !code.isEmpty else { return nil }
        if let exact = voices.first(where: { $0.languages.first == code }) ?? voices.first(where: { $0.languages.contains(code) }) {
            return exact
        }
        let base = String(code.split(separator: "-").first ?? "")
        return voices.first(where: { $0.languages.first == base }) ?? voices.first(where: { $0.languages.contains(base) })
    }

    /// Speaks `text` at `speakingRate` (1 = normal) and `pitchSemitones`
    /// (-20...20), returning mono s16 PCM at `sampleRate`.
    func speak(text: String, isSSML: Bool, voice: EspeakVoice, speakingRate: Double, pitchSemitones: Double, sampleRate: Int) async throws
        -> PCMAudio
    {
        try await speakTimed(
            text: text, isSSML: isSSML, voice: voice, speakingRate: speakingRate, pitchSemitones: pitchSemitones, sampleRate: sampleRate
        ).pcm
    }

    /// As `speak`, with when each sentence, word and mark of `text` is
    /// spoken, from espeak's events (seconds, which resampling keeps).
    func speakTimed(
        text: String, isSSML: Bool, voice: EspeakVoice, speakingRate: Double, pitchSemitones: Double, sampleRate: Int
    ) async throws -> (pcm: PCMAudio, timeline: SpeechTimeline) {
        let utterance = EspeakUtterance(
            text: text, isSSML: isSSML, voice: voice,
            wordsPerMinute: Int((175 * speakingRate).rounded()),
            pitch: Int((50 + pitchSemitones * 2.5).rounded()))
        let speech = try await engine.speakWithEvents(utterance)
        let timeline = SpeechTimeline(text: text, isSSML: isSSML, speech: speech)
        let native = speech.pcm
        if native.sampleRate == sampleRate { return (native, timeline) }
        // libswresample is C work: keep it off the event loops and the cooperative pool.
        return (try await ServerThreads.pool.runIfActive { try native.resampled(to: sampleRate) }, timeline)
    }

    /// Google spells language codes `en-US`; espeak spells them `en-us`.
    static func googleLanguageCode(_ espeak: String) -> String {
        let parts = espeak.split(separator: "-")
        guard parts.count >= 2 else { return espeak }
        return parts.enumerated().map { index, part in
            index > 0 && part.count == 2 ? part.uppercased() : String(part)
        }.joined(separator: "-")
    }
}
