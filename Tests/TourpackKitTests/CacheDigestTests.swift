import Foundation
import Testing
import TourpackCore

@testable import TourpackState

/// The caches' keys are SHA-256 of length-framed fields; their bytes must
/// never change, or every cached chunk and file would be made again.
@Suite struct CacheDigestTests {
    @Test func theFramingIsTheLengthAColonTheFieldAndANewline() {
        // sha256 of "18:tourpack output v1\n3:aac\n15:é ü 日本\n0:\n", computed apart (Python's hashlib).
        #expect(
            CacheDigest.of(["tourpack output v1", "aac", "é ü 日本", ""])
                == "ed153bf6d6868ee46fbd4af69825aeea67ce6b1a7475efa3e646de25e95b55d5")
        #expect(CacheDigest.of([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }
}

/// Digests are written as lowercase hex everywhere (keys, package.json,
/// object names), by one encoder: every byte value, from contiguous bytes
/// and from any other sequence alike.
@Suite struct LowercaseHexTests {
    @Test func everyByteIsTwoLowercaseDigits() {
        let all = (0...255).map(UInt8.init)
        let expected = all.map { String(format: "%02x", $0) }.joined()
        #expect(all.lowercaseHex == expected)
        #expect(Data(all).lowercaseHex == expected)
        #expect(all.lazy.map { $0 }.lowercaseHex == expected, "a sequence with no contiguous storage")
        #expect([UInt8]().lowercaseHex.isEmpty)
        // A digest, through the package's own SHA-256 helper.
        #expect(PackageFiles.sha256(Data("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
