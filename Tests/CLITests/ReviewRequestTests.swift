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

    /// Issue 35: a DNS-rebinding page's `Host` is refused; the bound address,
    /// localhost and (on loopback) the loopback literals are answered, any port.
    @Test func onlyItsOwnHostNamesAreAnswered() {
        let loopback = ReviewHostCheck(bound: "127.0.0.1")
        for host in ["127.0.0.1:8790", "127.0.0.1", "localhost:8790", "LOCALHOST", "[::1]:8790", "localhost."] {
            #expect(loopback.verdict(host) == .allowed, "\(host)")
        }
        for host in ["attacker.example", "attacker.example:8790", "127.0.0.1.attacker.example", "10.0.0.5:8790", "[fe80::1]"] {
            #expect(loopback.verdict(host) == .misdirected(host), "\(host)")
        }
        #expect(loopback.verdict(nil) == .missing && loopback.verdict("") == .missing)
        let shared = ReviewHostCheck(bound: "192.168.1.20")
        #expect(shared.verdict("192.168.1.20:8790") == .allowed && shared.verdict("127.0.0.1") == .misdirected("127.0.0.1"))
        let wildcard = ReviewHostCheck(bound: "0.0.0.0")
        #expect(wildcard.verdict("10.0.0.5:8790") == .allowed && wildcard.verdict("[fe80::1]:8790") == .allowed)
        #expect(wildcard.verdict("attacker.example") == .misdirected("attacker.example"))
        #expect(wildcard.verdict("999.1.1.1") == .misdirected("999.1.1.1"))
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
