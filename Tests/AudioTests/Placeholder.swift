import Testing
import TourpackKit

@Test func formatsMatchTheSpecTable() {
    #expect(AudioFormat.allCases.map(\.fileExtension) == ["m4a", "mp3", "opus"])
}
