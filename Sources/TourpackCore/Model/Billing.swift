import Foundation

/// How one provider bills a request: in which unit, in which tier, and how
/// many units a chunk costs. The ledger reserves, settles and refuses in
/// these units, and `plan` and `quota` show them, so every figure agrees
/// with the provider's own bill.
///
/// - Google and OpenAI: characters of the input as sent (Unicode scalars);
///   Google's `<mark>` tags are not billed (its pricing page), but the
///   `<speak>` that carries them around plain text is.
/// - Polly: characters of the text, SSML tags not counted.
/// - Azure: characters of the SSML inside `<voice>` (markup included, the
///   `<speak>` and `<voice>` elements not), a CJK ideograph or kana counting two.
/// - ElevenLabs: credits, one a character, half a character rounded up
///   per request for Flash and Turbo models.
/// - Piper: characters of the text sent (no markup), in the `local` tier:
///   counted, never refused, nothing to pay.
///
/// With sentence timings asked for (captions), Polly's chunk costs two
/// requests, the audio and its sentence speech marks, each billed like the
/// other; Google's chunk of plain text is sent as SSML (`<speak>`, escaped,
/// its marks free); ElevenLabs' `with-timestamps` costs nothing more (see
/// the Voices article).
public struct BillingRule: Sendable, Hashable {
    public var api: TTSAPI
    public var tier: PricingTier
    /// Azure bills the `<prosody>` that carries these.
    public var speakingRate: Double = 1
    public var pitch: Double = 0
    /// Whether each chunk also asks for its sentences' timings (captions on).
    public var timings = false

    public init(api: TTSAPI, voice: VoicePreset, timings: Bool = false) {
        self.api = api
        tier = voice.tier
        speakingRate = voice.speakingRate
        pitch = voice.pitch
        self.timings = timings
    }

    public init(api: TTSAPI, tier: PricingTier) {
        self.api = api
        self.tier = tier
    }

    /// "characters" or "credits", for messages and reports.
    public var unit: String { api == .elevenlabs && tier != .local ? "credits" : "characters" }

    /// Billed requests a chunk takes: two for Polly with timings (the audio,
    /// then its speech marks), one otherwise.
    public var requestsPerChunk: Int { timings && api == .polly ? 2 : 1 }

    /// What a chunk costs: every request it takes. The ledger reserves and
    /// `plan` estimates this.
    public func units(for chunk: Chunk) -> Int { requestUnits(for: chunk) * requestsPerChunk }

    /// What one request with this chunk costs; the synthesizer counts each
    /// request it sends in these.
    public func requestUnits(for chunk: Chunk) -> Int {
        switch api {
        case .google where timings && !chunk.isSSML:
            // Sent as SSML to carry its marks, which are free: `<speak>`, the
            // text escaped (so holding no tag) and `</speak>`, counted without
            // building them.
            return "<speak></speak>".unicodeScalars.count + SSML.escapedScalarCount(chunk.text.unicodeScalars)
        case .google, .openai:
            return chunk.characters
        case .polly:
            return Self.textCharacters(chunk)
        case .azure:
            let inner = AzureSSML.voiceContent(chunk, speakingRate: speakingRate, pitch: pitch)
            return inner.unicodeScalars.reduce(0) { $0 + (Self.isDoubleWidth($1) ? 2 : 1) }
        case .piper:
            // What Piper is sent: the text, no markup.
            return Self.textCharacters(chunk)
        case .elevenlabs:
            let characters = chunk.isSSML ? Self.textCharacters(chunk) : chunk.characters
            return tier == .halfCredit ? (characters + 1) / 2 : characters
        }
    }

    /// What Google bills for an input: its characters, `<mark …/>` tags left out.
    public static func googleCharacters(_ input: String) -> Int {
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
    public static func textCharacters(_ chunk: Chunk) -> Int {
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
    public static func innerSSML(_ ssml: String) -> String {
        guard let open = ssml.range(of: "<speak"), let openEnd = ssml[open.upperBound...].firstIndex(of: ">"),
            let close = ssml.range(of: "</speak>", options: .backwards), close.lowerBound > openEnd
        else { return ssml }
        return String(ssml[ssml.index(after: openEnd)..<close.lowerBound])
    }

    /// Azure counts Chinese, Japanese and Korean characters twice.
    static func isDoubleWidth(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x1100...0x11FF, 0x3040...0x30FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xAC00...0xD7AF, 0xF900...0xFAFF, 0x20000...0x2FA1F:
            return true
        default:
            return false
        }
    }
}

/// The SSML Azure receives: a `<voice>` in a `<speak>`, with the chunk
/// (plain text escaped, or an SSML document's content) inside, wrapped in
/// `<prosody>` when the voice's rate or pitch is not the default. Shared by
/// the request builder and `BillingRule`, since Azure bills the markup
/// inside `<voice>`.
public enum AzureSSML {
    /// What goes inside `<voice>`.
    public static func voiceContent(_ chunk: Chunk, speakingRate: Double, pitch: Double) -> String {
        let inner = chunk.isSSML ? BillingRule.innerSSML(chunk.text) : SSML.escape(chunk.text)
        guard speakingRate != 1 || pitch != 0 else { return inner }
        var attributes = ""
        if speakingRate != 1 { attributes += " rate=\"\(speakingRate.compactText)\"" }
        if pitch != 0 { attributes += " pitch=\"\(pitch > 0 ? "+" : "")\(pitch.compactText)st\"" }
        return "<prosody\(attributes)>\(inner)</prosody>"
    }

    /// The whole request body.
    public static func document(_ chunk: Chunk, voice: VoicePreset) -> String {
        let language = SSML.escape(voice.languageCode)
        return "<speak version=\"1.0\" xmlns=\"http://www.w3.org/2001/10/synthesis\" xml:lang=\"\(language)\">"
            + "<voice name=\"\(SSML.escape(voice.name))\">"
            + voiceContent(chunk, speakingRate: voice.speakingRate, pitch: voice.pitch) + "</voice></speak>"
    }
}
