import Crypto
package import TourpackCore

/// The package's UUID: RFC 4122 version 5 (SHA-1, name-based) of the tour,
/// the voice and the format, so a rebuild of the same tour in the same voice
/// and format lands in the same `OfflineTours/<packageId>` folder and
/// replaces its own package, while another voice or format gets its own.
///
/// The name hashed is `PackageID.name(...)`: the compact canonical JSON
/// array `["tourpack-package/1", tourId, provider, name, languageCode,
/// speakingRate, pitch, format]`, with the bit rate appended when it is not
/// the format's contract rate (a rung of a quality ladder), so the packages
/// built before ladders existed keep their IDs. JSON keeps the fields apart
/// whatever they contain. The voice's pricing tier is left out: it changes
/// the bill, not the audio.
package enum PackageID {
    /// tourpack's namespace: uuid5(NAMESPACE_URL, "https://tourpack.invalid/package").
    /// Changing it would move every package, so it is fixed forever.
    package static let namespace = "9a98a9ef-eacf-5747-868b-849443fa4c40"

    /// The lowercase v5 UUID of this tour, voice, format and bit rate (nil: the contract's).
    package static func make(tourID: SafeID, voice: VoicePreset, format: AudioFormat, bitrateKbps: Int? = nil) -> SafeID {
        uuid5(namespace: namespace, name: name(tourID: tourID, voice: voice, format: format, bitrateKbps: bitrateKbps))
    }

    /// The exact name string hashed, documented so it can be checked by hand.
    package static func name(tourID: SafeID, voice: VoicePreset, format: AudioFormat, bitrateKbps: Int? = nil) -> String {
        var fields: [JSONValue] = [
            .string("tourpack-package/1"), .string(tourID.value), .string(voice.provider), .string(voice.name),
            .string(voice.languageCode), .number(voice.speakingRate), .number(voice.pitch), .string(format.rawValue),
        ]
        if let bitrateKbps, bitrateKbps != format.bitrateKbps { fields.append(.number(Double(bitrateKbps))) }
        return String(decoding: JSONValue.array(fields).canonicalBytes(pretty: false), as: UTF8.self)
    }

    /// RFC 4122 §4.3: SHA-1 over the namespace's 16 bytes then the name's
    /// UTF-8, first 16 bytes kept, version nibble 5, variant bits 10.
    package static func uuid5(namespace: String, name: String) -> SafeID {
        // A namespace is a UUID: its 32 hex digits, the dashes left out.
        var input = [UInt8](hex: namespace.filter { $0 != "-" })!
        input.append(contentsOf: Array(name.utf8))
        var bytes = Array(Insecure.SHA1.hash(data: input).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.lowercaseHex
        let parts = [
            hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20),
        ]
        // A well-formed UUID by construction.
        return SafeID(validating: parts.joined(separator: "-"))!
    }
}

extension PipelineConfig {
    /// The package of `tourID` in `format`, in this configuration's voice and bit rate.
    package func packageID(tourID: SafeID, format: AudioFormat) -> SafeID {
        PackageID.make(tourID: tourID, voice: voice, format: format, bitrateKbps: bitrate(for: format))
    }
}
