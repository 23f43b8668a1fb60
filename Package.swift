// swift-tools-version: 6.0
//
// tourpack: the batch pipeline that builds the touring app's offline audio
// packages. The targets are the layers, and their dependencies the architecture:
//
//   TourpackPackage a package as it ships: package.json, the catalogue, their files,
//                  the Documents layout, the atomic commit  (Foundation, swift-crypto)
//   TourpackCore   values between stages, settings, SSML rules  (re-exports TourpackPackage)
//   TourpackHTTP   libcurl, SigV4, retries, limits, S3      (Core)
//   TourpackAudio  FFmpeg, loudness, FLAC, join, leveller    (Core)
//   TourpackMaps   tile math, fetcher, MBTiles               (Core, HTTP)
//   TourpackState  caches, ledger, claims, records           (Core, HTTP, Audio)
//   TourpackSpeech the synthesizer, answer decoding, the TTS providers  (Core, HTTP, Audio)
//   TourpackLoad   tours, pipelines, voices, lexicons        (Core, HTTP, Maps, State, Speech)
//   TourpackPlan   plan, report, shards, package IDs, chunks, captions  (Core, Audio, Maps, State)
//   TourpackValidate a bundle's defects, each with its path  (Core, Audio, Maps, Plan)
//   TourpackKit    the top stage and the library: build, store, tile packs
//                  (all of the above; re-exports Speech, Load, Plan and Validate)
//   TourpackPublish the publisher and the sites it writes the signed catalogue to (Core, HTTP, Maps, Kit)
//   TourpackClient the app's library: catalogue, download, verify, install (TourpackPackage only)
//   TourpackInstall `tourpack install`'s libcurl site source for the client  (Core, HTTP, Client)
//   TourpackServer serve-tts (espeak-ng) and serve-tiles; `tourpack` is the thin CLI.
//   TourpackReview `review`: a root's packages as web pages, served or exported (Core, Audio, Maps, Plan, Validate)
//
// Speech, Load, Plan and Validate are the pipeline's stages, a target each;
// TourpackKit, the top stage, runs them as one build and is the library.
// `validate` and `review` link the stages they use, never the builder.
//
// Beside the product, never in it (`tourpack` depends on none of them):
//
//   TourpackFuzz   the fuzz targets' bodies, run by the corpus tests and `make fuzz` (Core, Audio, Maps, the stages, Client)
//   TourpackTesting the tests' and benches' support: servers, fixtures, clocks, scratch folders
//   TourpackBench  `make bench` only (`TOURPACK_BENCH=1`); TourpackFuzzEntry, `make fuzz` only (`TOURPACK_FUZZ=1`)
//
// Every C library sits behind a `C<Name>` system-library target plus, where
// Swift cannot reach on its own, a `C<Name>Shims` target.
import PackageDescription

let package = Package(
    name: "tourpack",
    // The app's library is for iPhone apps (iOS 16: `ContinuousClock`,
    // `Task.sleep(for:)`) and Mac ones; the rest of the package runs on Linux
    // and macOS, and a Mac build of it needs macOS 14 (Hummingbird).
    platforms: [.macOS(.v14), .iOS(.v16)],
    products: [
        .executable(name: "tourpack", targets: ["tourpack"]),
        .library(name: "TourpackKit", targets: ["TourpackKit"]),
        // The touring app's offline layer: catalogue, downloads, installed packages.
        .library(name: "TourpackClient", targets: ["TourpackClient"]),
        // For an app's tests of its offline screens: a network set by hand
        // (`ManualNetworkMonitor`) and a published site served in process (`InProcessSite`).
        .library(name: "TourpackClientTesting", targets: ["TourpackClientTesting"]),
    ],
    dependencies: [
        // CLI parsing for the thin executable.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Pipeline and voice presets are YAML.
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        // SHA-256 of audio files and content hashes; SHA-1 for UUIDv5 package IDs.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // The embedded TTS endpoint (`serve-tts`).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        // NIOThreadPool keeps blocking C work (curl, FFmpeg, espeak) off the cooperative pool.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Build state in SQLite (WAL, versioned migrations): the cache indexes,
        // the quota ledger and the build records, shared by concurrent jobs.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // The same state in PostgreSQL when `state.postgres` is set, so workers
        // on several machines share one ledger and one cache index.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // HTTP field names for serve-tts's headers; already a dependency of Hummingbird.
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // UnixSignals: the embedded servers stop on SIGINT and SIGTERM; already a dependency of Hummingbird.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // `make docs`: the DocC catalog (`swift package generate-documentation`).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // MARK: C walls
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(name: "CCurlShims", dependencies: ["CCurl"], linkerSettings: [.linkedLibrary("curl")]),
        // SQLite from a descriptor (a read-only VFS) and a time limit on a connection's statements.
        .target(name: "CSQLiteShims", linkerSettings: [.linkedLibrary("sqlite3")]),
        // FFmpeg's headers only (Debian's multiarch include folder, where
        // `pkg-config --cflags libavformat` points): nothing links the
        // libraries, which CFFmpegShims loads on first use (`loader.c`), so
        // a command that encodes nothing does not pay for loading them.
        .systemLibrary(
            name: "CFFmpeg",
            providers: [.apt(["libavcodec-dev", "libavformat-dev", "libavutil-dev", "libswresample-dev"])]
        ),
        .target(
            name: "CFFmpegShims",
            dependencies: ["CFFmpeg"],
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // EBU R128 / ITU-R BS.1770 loudness and true peak: the reference the
        // tests hold TourpackAudio's own meter to (the product does not link it).
        .systemLibrary(
            name: "CEbur128",
            pkgConfig: "libebur128",
            providers: [.apt(["libebur128-dev"])]
        ),
        .systemLibrary(
            name: "CEspeakNG",
            pkgConfig: "espeak-ng",
            providers: [.apt(["libespeak-ng-dev"])]
        ),

        // MARK: Swift: the layers, bottom up. Each lists only what it uses;
        // across targets, `package` access, never `public` for the package's own sake.

        // The values passed between stages (`Model/`), the pipeline's settings
        // (`Settings/`), errors and diagnostics, and the file primitives every
        // layer writes through (atomic files, the output root's lock, the
        // Documents layout).
        // A tour package as it ships, and nothing of how it is made: package.json
        // and the catalogue (models, canonical coding, the Ed25519 signature),
        // the files a package names and where each may go in Documents, and the
        // atomic commit (atomic files, the journal, the staging area). Foundation
        // and swift-crypto only, so the app's library (`TourpackClient`) can sit
        // on it; the builder and the publisher use the same code through Core.
        .target(
            name: "TourpackPackage",
            dependencies: [
                // SHA-256 of files and manifests; Ed25519 catalogue signatures.
                .product(name: "Crypto", package: "swift-crypto")
            ]
        ),
        .target(
            name: "TourpackCore",
            dependencies: [
                // Re-exported: every layer above speaks in its types.
                "TourpackPackage"
            ]
        ),
        // HTTP over libcurl: the transport, SigV4, retries, rate and concurrency
        // limits. Synthesis, map tiles and the object store all talk through it.
        .target(
            name: "TourpackHTTP",
            dependencies: [
                "TourpackCore", "CCurl", "CCurlShims",
                // The object store's payload hashes (SigV4) and Content-MD5.
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Audio through FFmpeg's libraries: encoders, FLAC, the streamed join,
        // the loudness meter (BS.1770, our own) and leveller, inspection.
        .target(
            name: "TourpackAudio",
            dependencies: [
                "TourpackCore", "CFFmpeg", "CFFmpegShims",
                // SHA-256 of encoded files.
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Map tiles: tile math, the fetcher, MBTiles packs (SQLite through GRDB).
        .target(
            name: "TourpackMaps",
            dependencies: [
                "TourpackCore", "TourpackHTTP", "CSQLiteShims",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // What a build remembers: the synthesis, output and tile caches, the quota
        // ledger, chunk claims and build records, in SQLite (GRDB) by default or
        // PostgreSQL (PostgresNIO); the fleet's chunks in the S3 object store (HTTP).
        .target(
            name: "TourpackState",
            dependencies: [
                "TourpackCore", "TourpackHTTP", "TourpackAudio",
                // Cache keys, lock keys and the ledger's account are SHA-256 digests.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // The event loop group PostgresNIO's connections run on.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The pipeline's stages, each a target, bottom up; TourpackKit runs them.
        // Speech: the synthesizer and answer decoding over TourpackHTTP, and in
        // `Providers/` one file per TTS provider (its descriptor and dialect,
        // all registered in `SpeechProviders.all`).
        .target(
            name: "TourpackSpeech",
            dependencies: [
                "TourpackCore", "TourpackHTTP", "TourpackAudio",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Load: tours, pipelines, voices and lexicons, every problem reported at
        // once. Speech: the providers a pipeline and a voice may name.
        .target(
            name: "TourpackLoad",
            dependencies: [
                "TourpackCore", "TourpackHTTP", "TourpackMaps", "TourpackState", "TourpackSpeech",
                .product(name: "Yams", package: "Yams"),
            ]
        ),
        // Plan: the build plan and its report (cost, cache hits, quota, tiles),
        // shards, package IDs, the chunker and the caption script.
        .target(
            name: "TourpackPlan",
            dependencies: [
                "TourpackCore", "TourpackAudio", "TourpackMaps", "TourpackState",
                // Package IDs (UUIDv5, SHA-1) and shard hashes.
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Validate: a bundle checked file by file, every defect with its path, as
        // text, JSON or JUnit. Plan: package IDs and the caption script; GRDB:
        // tile packs read with SQL.
        .target(
            name: "TourpackValidate",
            dependencies: [
                "TourpackCore", "TourpackAudio", "TourpackMaps", "TourpackPlan",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The top stage: the builder and its steps, the store (package.json,
        // publishing into the output root, cache maintenance) and tile packs.
        // The library product: it re-exports the stages below it.
        .target(
            name: "TourpackKit",
            dependencies: [
                "TourpackCore", "TourpackHTTP", "TourpackAudio", "TourpackMaps", "TourpackState",
                "TourpackSpeech", "TourpackLoad", "TourpackPlan", "TourpackValidate",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Shipping to devices: the publisher (its rollback and garbage
        // collection) and the sites it writes to. The catalogue's model, its
        // Ed25519 signature and the keys are TourpackPackage's (Catalog/),
        // which the app's library verifies with.
        .target(
            name: "TourpackPublish",
            dependencies: [
                "TourpackCore", "TourpackHTTP", "TourpackMaps", "TourpackKit",
                // The SHA-256 of each local package.json, which the catalogue names.
                .product(name: "Crypto", package: "swift-crypto"),
                // A folder site's copies and fsyncs run on its thread pool, off the cooperative pool.
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The touring app's download manager, as a library the app embeds:
        // a site's signed catalogue read conditionally, packages downloaded
        // with resume over URLSession, verified, and moved into the Documents
        // layout with the build's journalled commit; what is installed, its
        // files, budget and expiry. Foundation and swift-crypto only (through
        // TourpackPackage), so it builds for iOS and macOS as well as Linux,
        // and links nothing under the GPL (`make lint` checks both).
        .target(
            name: "TourpackClient",
            // Digests and signatures come from TourpackPackage (swift-crypto).
            dependencies: ["TourpackPackage"],
            // The public API as `make lint` checks it (scripts/check-client-api.py), not a resource.
            exclude: ["PublicAPI.txt"]
        ),
        // What an app's tests use with the library: a `NetworkMonitoring`
        // set by hand, and a published site folder served in process through
        // a `URLProtocol`. On TourpackClient's public API and Foundation alone.
        .target(
            name: "TourpackClientTesting",
            dependencies: ["TourpackClient"]
        ),
        // `tourpack install` over HTTP: the client's site source on libcurl,
        // as every other request of the CLI goes (the app uses URLSession).
        .target(
            name: "TourpackInstall",
            dependencies: ["TourpackCore", "TourpackHTTP", "TourpackClient"]
        ),
        .target(
            name: "TourpackServer",
            dependencies: [
                "TourpackCore", "TourpackHTTP", "TourpackAudio", "CEspeakNG", "CFFmpeg", "CFFmpegShims",
                // SHA-256 of each request's text (the repeated-request counter in `/debug/stats`) and of each tile (its ETag).
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // `tourpack review`: a Documents root as the traveller meets it, in a
        // browser: the packages, each tour on the map of its own tile pack,
        // each POI's audio and validate's findings; served read-only on
        // loopback or written out as a static site.
        .target(
            name: "TourpackReview",
            dependencies: [
                // Maps: the tile packs (`MBTilesReader`); Validate: `BundleValidator` and its findings;
                // Plan: `PlanReport`'s figures. Not the builder (TourpackKit).
                "TourpackCore", "TourpackMaps", "TourpackPlan", "TourpackValidate",
                // Loudness and true peak of each file (`AudioLoudness`), as package.json records them.
                "TourpackAudio",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                // Files and tiles are read on its thread pool, off the cooperative pool.
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "tourpack",
            dependencies: [
                "TourpackCore", "TourpackHTTP", "TourpackAudio", "TourpackState", "TourpackKit", "TourpackPublish", "TourpackClient",
                "TourpackInstall", "TourpackServer",
                // `validate` and `review`: the loader, the plan's figures and the validator, not the builder.
                "TourpackLoad", "TourpackPlan", "TourpackValidate",
                "TourpackReview",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The sample of the "Embedding the client in an app" article, compiled
        // by every `swift build`: an app's flow on `TourpackClient` alone.
        .executableTarget(
            name: "OfflineTourExample",
            dependencies: ["TourpackClient"],
            path: "Examples/OfflineTourApp"
        ),
        // The bodies of the fuzz targets: each hands its bytes to a real parser
        // and traps when a property that must hold for any input does not.
        // Not a product: TourpackKitTests replays the corpus through it, and
        // `make fuzz`'s libFuzzer executable (TourpackFuzzEntry, below) runs it.
        .target(
            name: "TourpackFuzz",
            // The stages' parsers and decoders, not the builder; TourpackClient: the
            // `trust-record` target reads a site as a device does.
            dependencies: [
                "TourpackCore", "TourpackAudio", "TourpackMaps", "TourpackLoad", "TourpackPlan", "TourpackSpeech",
                "TourpackValidate", "TourpackClient",
            ]
        ),

        // MARK: Tests
        // The one test-support target, for the tests and the benches: a throwaway
        // PostgreSQL (Debian's initdb and pg_ctl), one per process, an
        // S3-compatible moto server (PyPI moto[server]), a capture server, a
        // published site's server (Range, If-Range, ETag, injected faults), the
        // built `tourpack` and the tools the tests check output with, run to their
        // end, `.offThePool`, which keeps blocking tests off the cooperative pool,
        // and the one `ManualClock`, `SeededGenerator` and `TemporaryFolder`.
        .target(
            name: "TourpackTesting",
            dependencies: [
                // `SiteFixture`: a published site made without a build, through the real publisher.
                "TourpackCore", "TourpackKit", "TourpackPublish",
                // The site server's ETags are the SHA-256 of each file.
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/TourpackTesting"
        ),
        // The app's library as an app uses it: `import TourpackClient`, never
        // `@testable`, against sites served over loopback HTTP.
        .testTarget(
            name: "TourpackClientTests",
            dependencies: ["TourpackClient", "TourpackClientTesting", "TourpackTesting"]
        ),
        .testTarget(
            name: "TourpackKitTests",
            // Yams: the deploy/ manifests are checked by parsing them.
            dependencies: [
                "TourpackCore", "TourpackHTTP", "TourpackAudio", "TourpackMaps", "TourpackState", "TourpackKit", "TourpackTesting",
                // The stages' internals, `@testable`, beside the builder's.
                "TourpackLoad", "TourpackPlan", "TourpackSpeech", "TourpackValidate",
                // FuzzCorpusTests: every input of Fuzz/Corpus through its target's body.
                "TourpackFuzz",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Yams", package: "Yams"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            resources: [.copy("Resources")]
        ),
        .testTarget(
            name: "AudioTests",
            dependencies: [
                "TourpackCore", "TourpackAudio", "TourpackMaps", "TourpackKit", "CFFmpeg", "CFFmpegShims", "CEbur128", "TourpackTesting",
                // validate's checks, `@testable`.
                "TourpackLoad", "TourpackPlan", "TourpackValidate",
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "TourpackServerTests",
            dependencies: [
                "TourpackCore", "TourpackHTTP", "TourpackAudio", "TourpackState", "TourpackKit", "TourpackServer", "TourpackTesting",
                // The synthesizer's internals, `@testable`.
                "TourpackSpeech",
                .product(name: "Logging", package: "swift-log"),
            ],
            // Python scripts that drive serve-tts with Google's and OpenAI's own client libraries.
            resources: [.copy("Clients")]
        ),
        .testTarget(
            name: "PublishTests",
            // `Tool` runs python3 (jsonschema, cryptography) as independent checkers.
            dependencies: [
                "TourpackCore", "TourpackAudio", "TourpackMaps", "TourpackKit", "TourpackPublish", "TourpackTesting",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "InstallTests",
            // TourpackTesting's loopback site server (Range, If-Range, ETag, injected faults); `tourpack` through `Executable`;
            // TourpackClientTesting's in-process site, which serves the shared vectors to the app's own URLSession source.
            dependencies: [
                "TourpackCore", "TourpackHTTP", "TourpackKit", "TourpackPublish", "TourpackClient", "TourpackInstall", "TourpackTesting",
                "TourpackClientTesting", "TourpackPackage",
            ]
        ),
        .testTarget(
            name: "CLITests",
            dependencies: [
                "TourpackCore", "TourpackAudio", "TourpackMaps", "TourpackState", "TourpackKit", "TourpackTesting",
                // `review`'s request parsing (paths, ranges) and escaping, tested without a browser.
                "TourpackReview",
                // The app's library on built, published tours (its public API only): playing while downloading.
                "TourpackClient",
            ],
            // The Selenium script that walks `tourpack review`'s pages in headless Chromium, run from the source tree.
            exclude: ["Browser"]
        ),
    ]
)

// `make bench` only (`TOURPACK_BENCH=1`), as Hummingbird gates its own:
// speed and memory figures, never timed tests. The benches use the tests'
// support (TourpackTesting: PostgreSQL, moto, the site server), so an
// ordinary build, and `make tour`, never compile them.
if Context.environment["TOURPACK_BENCH"] == "1" {
    package.products.append(.executable(name: "tourpack-bench", targets: ["TourpackBench"]))
    package.targets.append(
        .executableTarget(
            name: "TourpackBench",
            dependencies: [
                // The ledger and fleet benches start a throwaway PostgreSQL and moto of their own.
                "TourpackCore", "TourpackHTTP", "TourpackAudio", "TourpackMaps", "TourpackState", "TourpackKit", "TourpackPublish",
                "TourpackServer", "TourpackTesting",
                // The install bench: a published site installed over HTTP from TourpackTesting's site server.
                "TourpackClient", "TourpackInstall",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ))
}

// `make fuzz` only (`TOURPACK_FUZZ=1`): one libFuzzer executable whose
// `TOURPACK_FUZZ_TARGET` picks the parser (TourpackFuzz's `FuzzHarness`),
// with libFuzzer's coverage and AddressSanitizer in this package's own Swift
// code. Dependencies build as usual; ordinary builds never see the target.
if Context.environment["TOURPACK_FUZZ"] == "1" {
    let sanitizers = ["-sanitize=fuzzer,address"]
    for target in package.targets where target.type == .regular || target.type == .executable {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(sanitizers)]
    }
    package.products.append(.executable(name: "tourpack-fuzz", targets: ["TourpackFuzzEntry"]))
    package.targets.append(
        .executableTarget(
            name: "TourpackFuzzEntry",
            dependencies: ["TourpackFuzz"],
            swiftSettings: [.unsafeFlags(sanitizers + ["-parse-as-library"])],
            linkerSettings: [.unsafeFlags(sanitizers)]
        ))
}

// The Makefile sets TOURPACK_OPTIMIZE_AUDIO=1: TourpackAudio's sample loops
// (the meter's K-weighting, the true-peak envelope, the limiter survey) are
// SIMD, which an unoptimized build runs lane by lane through generic code,
// ten to fifty times slower. Every debug `tourpack build` the tests run
// levels its audio, so the tests' debug build compiles this one target
// optimized; `@testable` still reaches it (SwiftPM adds -enable-testing).
// An environment switch, not a default: a product with an unsafe flag cannot
// be a versioned dependency of another package.
if Context.environment["TOURPACK_OPTIMIZE_AUDIO"] == "1" {
    for target in package.targets where target.name == "TourpackAudio" {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-O"], .when(configuration: .debug))]
    }
}

// CI (`.ci/run`) builds with TOURPACK_WARNINGS_AS_ERRORS=1, in debug and
// release: a warning in this package's own Swift code fails the run, one
// in a dependency does not (the flag is set on our targets only).
if Context.environment["TOURPACK_WARNINGS_AS_ERRORS"] == "1" {
    for target in package.targets where target.type != .system {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-warnings-as-errors"])]
    }
}

// Strict Swift 6 everywhere, as Hummingbird does: existentials spelled out,
// imports internal unless a public API needs them, members only from what is imported.
for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    // Extensions of a module are visible only where it is imported: GRDB's
    // string-interpolation `SQL` must never be inferred in code that did not ask for it.
    // Not in the example app and the client's tests, which are built as an
    // app and its tests are by default: they import TourpackClient alone,
    // and the members of `AudioFormat` and `AudioQuality` (typealiases of
    // the package's types) come with it.
    if !["OfflineTourExample", "TourpackClientTests"].contains(target.name) {
        settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    }
    target.swiftSettings = settings
}
