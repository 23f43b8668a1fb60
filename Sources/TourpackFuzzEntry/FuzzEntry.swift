// The libFuzzer entry point of every fuzz target, built only by `make fuzz`
// (`TOURPACK_FUZZ=1` adds this target to the package; see Package.swift).
// `TOURPACK_FUZZ_TARGET` names the parser the inputs go to
// (`FuzzHarness.targets`, in TourpackFuzz), so one sanitizer build serves them all.
import Foundation
import TourpackFuzz

/// The chosen target's body, looked up once.
let chosen: @Sendable ([UInt8]) -> Void = {
    let name = ProcessInfo.processInfo.environment["TOURPACK_FUZZ_TARGET"] ?? ""
    guard let target = FuzzHarness.targets.first(where: { $0.name == name }) else {
        let names = FuzzHarness.targets.map(\.name).joined(separator: " ")
        FileHandle.standardError.write(Data("tourpack-fuzz: set TOURPACK_FUZZ_TARGET to one of: \(names)\n".utf8))
        exit(2)
    }
    return target.run
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    chosen(bytes)
    return 0
}

/// libFuzzer's driver, for a program that brings its own `main`.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// The program's `main`: SwiftPM links an executable target with `main`
/// aliased to `<module>_main`, which `-parse-as-library` leaves undefined,
/// so it is this, handing the command line to libFuzzer's driver.
@_cdecl("TourpackFuzzEntry_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    _ = chosen  // An unknown target exits 2 here, before libFuzzer starts.
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments) { data, size in fuzzOneInput(data, size) }
}
