import Testing
@testable import TourpackKit

@Suite struct LayersTests {
    @Test func safeIDAcceptsOnlyCanonicalUUIDs() {
        #expect(SafeID(validating: "0B7C2F0E-5D1A-4F55-9A0E-2F3B8F6C1D42")?.value == "0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42")
        #expect(SafeID(validating: "../../etc/passwd") == nil)
        #expect(SafeID(validating: "0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d4") == nil)
        #expect(SafeID(validating: "0b7c2f0e/5d1a-4f55-9a0e-2f3b8f6c1d42") == nil)
    }

    @Test func phaseFileLabelsAreTheAppsSpelling() {
        #expect(Phase.allCases.map(\.fileLabel) == ["Approaching", "Detailed", "Guided Tour"])
    }
}
