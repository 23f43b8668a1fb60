import Foundation

/// How one provider bills a request: in which unit, in which tier, and how
/// many units a chunk costs. The ledger reserves, settles and refuses in
/// these units, and `plan` and `quota` show them, so every figure agrees
/// with the provider's own bill.
///
/// Each provider's descriptor says how it counts
/// (`SpeechProvider.requestUnits(for:billing:)`); the Voices article
/// tabulates them. With sentence timings asked for (captions), a chunk may
/// cost more than one request (`requestsPerChunk`).
package struct BillingRule: Sendable, Hashable {
    package var api: TTSAPI
    package var tier: PricingTier
    /// Azure bills the `<prosody>` that carries these.
    package var speakingRate: Double = 1
    package var pitch: Double = 0
    /// Whether each chunk also asks for its sentences' timings (captions on).
    package var timings = false

    package init(api: TTSAPI, voice: VoicePreset, timings: Bool = false) {
        self.api = api
        tier = voice.tier
        speakingRate = voice.speakingRate
        pitch = voice.pitch
        self.timings = timings
    }

    package init(api: TTSAPI, tier: PricingTier) {
        self.api = api
        self.tier = tier
    }

    /// "characters" or "credits", for messages and reports.
    package var unit: String { api.provider.billingUnit(for: tier) }

    /// Billed requests a chunk takes: two for Polly with timings (the audio,
    /// then its speech marks), one otherwise.
    package var requestsPerChunk: Int { api.provider.requestsPerChunk(timings: timings) }

    /// What a chunk costs: every request it takes. The ledger reserves and
    /// `plan` estimates this.
    package func units(for chunk: Chunk) -> Int { requestUnits(for: chunk) * requestsPerChunk }

    /// What one request with this chunk costs; the synthesizer counts each
    /// request it sends in these.
    package func requestUnits(for chunk: Chunk) -> Int { api.provider.requestUnits(for: chunk, billing: self) }

    /// What Google bills for an input: its characters, `<mark …/>` tags left out.
    package static func googleCharacters(_ input: String) -> Int {
        var count = input.unicodeScalars.count
        var rest = input[...]
        while let open = rest.range(of: "<mark") {
            let after = rest[open.upperBound...]
            guard let next = after.unicodeScalars.first, next == " " || next == "/" || next == ">" || next == "\t" || next == "\n",
                let close = after.firstIndex(of: ">")
            else {
                rest = after
                continue
            }
            count -= input.unicodeScalars[open.lowerBound...close].count
            rest = input[input.index(after: close)...]
        }
        return count
    }

    /// Characters outside tags; an entity counts as the one character it stands for.
    package static func textCharacters(_ chunk: Chunk) -> Int {
        guard chunk.isSSML else { return chunk.characters }
        var count = 0
        var inTag = false
        var inEntity = false
        for scalar in chunk.text.unicodeScalars {
            switch scalar {
            case "<": inTag = true
            case ">" where inTag: inTag = false
            case _ where inTag: break
            case "&":
                inEntity = true
                count += 1
            case ";" where inEntity: inEntity = false
            case _ where inEntity: break
            default: count += 1
            }
        }
        return count
    }

    /// The content of a `<speak>` document's root element.
    package static func innerSSML(_ ssml: String) -> String {
        guard let open = ssml.range(of: "<speak"), let openEnd = ssml[open.upperBound...].firstIndex(of: ">"),
            let close = ssml.range(of: "</speak>", options: .backwards), close.lowerBound > openEnd
        else { return ssml }
        return String(ssml[ssml.index(after: openEnd)..<close.lowerBound])
    }

    /// Azure counts Chinese, Japanese and Korean characters twice.
    package static func isDoubleWidth(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x1100...0x11FF, 0x3040...0x30FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xAC00...0xD7AF, 0xF900...0xFAFF, 0x20000...0x2FA1F:
            return true
        default:
            return false
        }
    }
}
