// swift-tools-version: 6.0
//
// tourpack: the batch pipeline that builds the touring app's offline audio
// packages. One library (`TourpackKit`) holds the pipeline; `TourpackServer`
// is the embedded espeak-ng TTS endpoint; `tourpack` is the thin CLI.
//
// Every C library sits behind a `C<Name>` system-library target plus, where
// Swift cannot reach on its own, a `C<Name>Shims` target.
import PackageDescription

let package = Package(
    name: "tourpack",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "tourpack", targets: ["tourpack"]),
        .executable(name: "tourpack-bench", targets: ["TourpackBench"]),
        .library(name: "TourpackKit", targets: ["TourpackKit"]),
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
    ],
    targets: [
        // MARK: C walls
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(name: "CCurlShims", dependencies: ["CCurl"], linkerSettings: [.linkedLibrary("curl")]),
        .target(name: "CSystemShims"),
        .systemLibrary(
            name: "CFFmpeg",
            pkgConfig: "libavformat",
            providers: [.apt(["libavcodec-dev", "libavformat-dev", "libavutil-dev", "libswresample-dev"])]
        ),
        .target(
            name: "CFFmpegShims",
            dependencies: ["CFFmpeg"],
            linkerSettings: [.linkedLibrary("avutil")]
        ),
        // EBU R128 / ITU-R BS.1770 loudness and true peak (`loudness` in the pipeline).
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

        // MARK: Swift
        .target(
            name: "TourpackKit",
            dependencies: [
                "CCurl", "CCurlShims", "CEbur128", "CFFmpeg", "CFFmpegShims", "CSystemShims",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .target(
            name: "TourpackServer",
            dependencies: [
                "TourpackKit", "CEspeakNG", "CFFmpeg", "CFFmpegShims",
                // SHA-256 of each request's text, for the repeated-request counter in `/debug/stats`.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "tourpack",
            dependencies: [
                "TourpackKit", "TourpackServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `make bench`: speed and memory figures, never timed tests.
        .executableTarget(
            name: "TourpackBench",
            dependencies: [
                // The ledger and fleet benches start a throwaway PostgreSQL and moto of their own.
                "TourpackKit", "TourpackServer", "TestServers",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Tests
        // Real servers on loopback for the tests and the benches: a throwaway
        // PostgreSQL (Debian's initdb and pg_ctl), one per process, and an
        // S3-compatible moto server (PyPI moto[server]); and the tools the
        // tests check output with, run to their end.
        .target(name: "TestServers", path: "Tests/TestServers"),
        .testTarget(
            name: "TourpackKitTests",
            // Yams: the deploy/ manifests are checked by parsing them.
            dependencies: [
                "TourpackKit", "TestServers", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Yams", package: "Yams"),
            ],
            resources: [.copy("Resources")]
        ),
        .testTarget(
            name: "AudioTests",
            dependencies: [
                "TourpackKit", "CFFmpeg", "CFFmpegShims", "TestServers",
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "TourpackServerTests",
            dependencies: [
                "TourpackKit", "TourpackServer", "TestServers",
                .product(name: "Logging", package: "swift-log"),
            ],
            // Python scripts that drive serve-tts with Google's and OpenAI's own client libraries.
            resources: [.copy("Clients")]
        ),
        .testTarget(
            name: "CLITests",
            dependencies: ["TourpackKit", "TestServers"]
        ),
    ]
)

// Strict Swift 6 everywhere, as Hummingbird does: existentials spelled out,
// imports internal unless a public API needs them, members only from what is imported.
for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    // Extensions of a module are visible only where it is imported: GRDB's
    // string-interpolation `SQL` must never be inferred in code that did not ask for it.
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    target.swiftSettings = settings
}
