// Public: a conformance of a public type to a public protocol is public.
public import ArgumentParser
import Foundation
public import TourpackCore

// The library's own lists of values, as ArgumentParser reads them: help
// (`(values: …)`), completion, parsing and the refusals all come from each
// type's `CaseIterable` cases through `allValueStrings`, so a case added in
// TourpackCore is offered and accepted here with no string to update.
// The conformances live here because the library does not depend on
// ArgumentParser. (Not marked `@retroactive`: the compiler counts a type of
// the same package as this target's own.)

/// `--api`: a dialect's raw value, exactly as the pipeline file spells it.
extension TTSAPI: ExpressibleByArgument {}

/// A format's raw value, in any case (`--format AAC`), as `--format` has always taken it.
extension AudioFormat: ExpressibleByArgument {
    public init?(argument: String) {
        self.init(rawValue: argument.lowercased())
    }
}

/// `--quality`: high, medium or low, in any case.
extension AudioQuality: ExpressibleByArgument {
    public init?(argument: String) {
        self.init(rawValue: argument.lowercased())
    }
}

/// One `--format` value: one or more format names, comma-separated
/// (`--format aac,opus`). The names are checked once parsing is done
/// (`PipelineOptions.validate`), so that an empty one is refused with its
/// own message; help and completion offer `AudioFormat`'s values.
struct FormatNames: ExpressibleByArgument {
    var names: [String]

    init(argument: String) {
        names = argument.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
    }

    static var allValueStrings: [String] { AudioFormat.allValueStrings }

    /// The formats named, in order; a usage error naming the allowed
    /// values for an empty or unknown name.
    static func formats(_ values: [FormatNames]) throws -> [AudioFormat] {
        let allowed = AudioFormat.allValueStrings.joined(separator: ", ")
        return try values.flatMap(\.names).map { name in
            guard !name.isEmpty else {
                throw ValidationError("--format: an empty format name; give one or more of \(allowed) (e.g. --format aac,opus)")
            }
            guard let format = AudioFormat(argument: name) else {
                throw ValidationError("--format: '\(name)' is not one of \(allowed)")
            }
            return format
        }
    }
}
