// `make bench` runs this. Each benchmark lives in its own file and is named
// on the command line: `tourpack-bench <name> [options]`.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first else {
    print("usage: tourpack-bench <benchmark> [options]")
    exit(2)
}
switch name {
case "tts": exit(await TTSBench.run(Array(arguments.dropFirst())))
case "build": exit(await BuildBench.run(Array(arguments.dropFirst())))
case "piper": exit(await PiperBench.run(Array(arguments.dropFirst())))
case "stream": exit(await StreamBench.run(Array(arguments.dropFirst())))
case "peer": exit(await PeerBench.run(Array(arguments.dropFirst())))
case "maps": exit(await MapsBench.run(Array(arguments.dropFirst())))
case "loudness": do { try LoudnessBench.run(Array(arguments.dropFirst())) } catch { print("loudness: \(error)"); exit(1) }
case "encode": do { try EncodeBench.run(Array(arguments.dropFirst())) } catch { print("encode: \(error)"); exit(1) }
case "ledger": exit(LedgerBench.run(Array(arguments.dropFirst())))
// One of `ledger`'s worker processes; not for people.
case "ledger-worker": exit(LedgerBench.worker(Array(arguments.dropFirst())))
case "fleet": exit(await FleetBench.run(Array(arguments.dropFirst())))
case "validate": do { try await ValidateBench.run(Array(arguments.dropFirst())) } catch { print("validate: \(error)"); exit(1) }
case "publish": do { try await PublishBench.run(Array(arguments.dropFirst())) } catch { print("publish: \(error)"); exit(1) }
case "install": do { try await InstallBench.run(Array(arguments.dropFirst())) } catch { print("install: \(error)"); exit(1) }
case "early": do { try await EarlyPlayBench.run(Array(arguments.dropFirst())) } catch { print("early: \(error)"); exit(1) }
default:
    print("unknown benchmark \(name)")
    exit(2)
}
