import Testing

@testable import TourpackReview

/// How `tourpack review` reads a request before it touches a file: the
/// path's segments (every spelling of `..` refused) and the `Range` header.
/// The browser tests cover what a real browser sends; these cover the rest.
@Suite struct ReviewRequestTests {
    @Test(arguments: [
        ("/", [String]()), ("/index.html", ["index.html"]), ("/tours/a.html", ["tours", "a.html"]),
        ("/audio/AudioCache/t/p_Guided%20Tour.m4a", ["audio", "AudioCache", "t", "p_Guided Tour.m4a"]),
        ("/assets/leaflet/", ["assets", "leaflet"]),
    ])
    func pathsSplitIntoDecodedSegments(path: String, segments: [String]) {
        #expect(ReviewSite.segments(ofPath: path) == segments)
    }

    @Test(arguments: [
        "/..", "/../secret", "/a/../b", "/a/./b", "/a//b", "/%2e%2e/secret", "/%2E%2E/secret", "/.%2e/secret", "/a/..%2fsecret",
        "/a%2fb", "/a%5cb", "/a\\b", "/a%00b", "/a%0ab", "/%", "/%zz", "relative", "",
    ])
    func dotsSlashesAndControlsAreRefused(path: String) {
        #expect(ReviewSite.segments(ofPath: path) == nil)
    }

    @Test func rangesAsRFC9110SpellsThem() {
        #expect(ByteRange.parse("bytes=0-", size: 1000) == 0..<1000)
        #expect(ByteRange.parse("bytes=100-199", size: 1000) == 100..<200)
        #expect(ByteRange.parse("bytes=900-5000", size: 1000) == 900..<1000, "an end past the last byte is cut to it")
        #expect(ByteRange.parse("bytes=-100", size: 1000) == 900..<1000, "the last 100 bytes")
        #expect(ByteRange.parse("bytes=-5000", size: 1000) == 0..<1000)
        #expect(ByteRange.parse(" bytes=999-999 ", size: 1000) == 999..<1000)
    }

    @Test(arguments: [
        "bytes=1000-", "bytes=5-4", "bytes=0-1,5-6", "items=0-1", "bytes=-0", "bytes=-", "bytes=a-b", "bytes=+1-2", "0-1", "",
    ])
    func unsatisfiableRangesAreRefused(header: String) {
        #expect(ByteRange.parse(header, size: 1000) == nil)
    }

    @Test func textFromPackageJSONIsEscaped() {
        #expect(ReviewPages.escape(#"<script>"x" & 'y'</script>"#) == "&lt;script&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/script&gt;")
        #expect(ReviewPages.json(["name": "</script><b>"]).contains("<") == false)
        #expect(ReviewPages.percentEncoded("p_Guided Tour.m4a") == "p_Guided%20Tour.m4a")
    }
}
