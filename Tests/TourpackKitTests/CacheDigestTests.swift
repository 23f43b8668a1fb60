import Foundation
import Testing

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
