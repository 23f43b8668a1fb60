import Testing
@testable import TourpackServer

@Test func serverDefaultsToLoopback() {
    #expect(TTSServerInfo.defaultHost == "127.0.0.1")
}
