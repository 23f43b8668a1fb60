package import Foundation
package import TourpackCore
import Yams

/// Loads the W3C PLS 1.0 lexicons a pipeline and its voice name
/// (`lexicons: [../lexicons/alps.pls]`), and checks that the endpoint in
/// use can say every lexeme.
///
/// Lexicons are read when the configuration is settled, not when the first
/// narration is chunked, so a broken lexicon is a config error (exit 2)
/// reported with every other one, before any plan or request.
package enum LexiconLoader {
    /// A lexicon is bigger than a YAML file but still small: a few thousand
    /// lexemes fit in well under this.
    package static let maxBytes = 4 * 1024 * 1024

    /// One lexicon file, or every problem in it.
    package static func load(_ url: URL, displayName: String) throws(DiagnosticsError) -> Lexicon {
        var diagnostics = DiagnosticCollector()
        let lexicon = load(url, displayName: displayName, into: &diagnostics)
        try diagnostics.throwIfErrors()
        return lexicon!
    }

    /// A lexicon from its text, as if read from `file`; for tests and tools.
    package static func parse(_ text: String, file: String) throws(DiagnosticsError) -> Lexicon {
        var reader = PLSReader(file: file)
        let lexicon = reader.read(text)
        try reader.diagnostics.throwIfErrors()
        guard let lexicon else { throw DiagnosticsError(diagnostics: [Diagnostic(file: file, message: "no lexicon")]) }
        return lexicon
    }

    static func load(_ url: URL, displayName: String, into diagnostics: inout DiagnosticCollector) -> Lexicon? {
        guard let text = read(url, displayName: displayName, into: &diagnostics) else { return nil }
        var reader = PLSReader(file: displayName)
        let lexicon = reader.read(text)
        diagnostics.append(contentsOf: reader.diagnostics.diagnostics)
        return reader.diagnostics.hasErrors ? nil : lexicon
    }

    /// The `lexicons` list of a pipeline or voice file: each path resolved
    /// against that file's folder, or an error at `lexicons[i]`.
    static func paths(_ node: Node?, base: URL, reader: inout YAMLReader) -> [URL] {
        guard let node, let paths = reader.strings(node, at: "lexicons") else { return [] }
        return paths.map { PipelineLoader.resolve($0, against: base) }
    }

    /// Every lexicon in `files`, in order, each loaded once even when named
    /// twice (by the voice and by the pipeline).
    static func loadAll(_ files: [URL], cwd: URL, into diagnostics: inout DiagnosticCollector) -> [Lexicon] {
        var seen: Set<String> = []
        var lexicons: [Lexicon] = []
        for file in files where seen.insert(file.path).inserted {
            let shown = TourLoader.relativePath(of: file, to: cwd)
            if let lexicon = load(file, displayName: shown, into: &diagnostics) { lexicons.append(lexicon) }
        }
        return lexicons
    }

    /// An error for every lexeme that the endpoint cannot say: one with a
    /// phoneme but no alias, when the dialect speaks aliases only. Each is
    /// named by its file, line and grapheme.
    static func checkSpeakable(
        _ lexicons: [Lexicon], api: TTSAPI, voice: VoicePreset, into diagnostics: inout DiagnosticCollector
    ) {
        guard PronunciationDialect(api: api, voice: voice) == .alias else { return }
        let speaker = PronunciationDialect.speaker(api: api, voice: voice)
        for lexeme in lexicons.flatMap(\.lexemes) where lexeme.alias == nil {
            diagnostics.error(
                lexeme.file, "line \(lexeme.line)",
                "\(lexeme.label) has a <phoneme> but no <alias>; \(speaker) cannot speak phonemes, so give it an <alias> to say instead"
            )
        }
    }

    private static func read(_ url: URL, displayName: String, into diagnostics: inout DiagnosticCollector) -> String? {
        do {
            guard let size = try FileReading.size(of: url) else {
                diagnostics.error(displayName, "", "not a regular file")
                return nil
            }
            guard size <= maxBytes else {
                diagnostics.error(displayName, "", "file is \(size) bytes, more than the \(maxBytes) allowed for a lexicon")
                return nil
            }
            let bytes = try FileReading.bytes(of: url, limit: maxBytes)
            guard let text = String(validating: bytes, as: UTF8.self) else {
                diagnostics.error(displayName, "", "not valid UTF-8")
                return nil
            }
            return text
        } catch {
            diagnostics.error(displayName, "", "cannot read: \(ConfigFile.reason(error))")
            return nil
        }
    }
}
