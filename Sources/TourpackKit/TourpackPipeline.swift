/// # How tourpack is put together
///
/// tourpack is a batch pipeline. Each stage lives in a folder of its own and
/// hands plain values (in `Layers/`) to the next:
///
///     Load/        tour JSON, pipeline and voice YAML  ->  Tour, PipelineConfig (with its PLS lexicons)
///     Plan/        tours + config                      ->  BuildPlan (chunks, cost, map tiles)
///     Chunk/       narration text, lexemes applied     ->  [Chunk] under the endpoint's limit
///     Synthesize/  Chunk + VoicePreset over libcurl    ->  PCMAudio (s16 mono)
///     Encode/      [PCMAudio] joined once, FFmpeg      ->  EncodedAudio (.m4a/.mp3/.opus)
///     Maps/        a tour's tiles (TileMath) over libcurl ->  tiles.mbtiles, via the tile cache in State/
///     Store/       EncodedAudio + Tour + tile pack     ->  AudioCache files, package.json
///     Validate/    a Documents root                    ->  ValidationReport (every finding, text/JSON/JUnit)
///
/// `Build/` runs the stages as one pipeline (`Builder`): items flow from
/// synthesis to encoding as their chunks arrive while each tour's map tiles
/// are fetched beside them (`TilePackMaker`); both wait in a staging folder,
/// and are published a tour at a time through a commit journal, so a killed
/// run never leaves a half-written package.
///
/// Problems with input are collected as `Diagnostic`s, never thrown one at a
/// time, so one run reports everything (`DiagnosticCollector`). Failures of
/// the work itself are `TourpackError`s, which carry the context a person
/// needs (file, JSON path, POI and phase, HTTP status) and map onto the exit
/// codes of SPEC.md. C libraries (libcurl, FFmpeg, espeak-ng; SQLite through GRDB) sit behind the
/// `C*` targets; one Swift type owns each C resource.
public enum TourpackPipeline {
    /// The version written into generated files and the encoder cache key.
    public static let version = "0.1.0"
}
