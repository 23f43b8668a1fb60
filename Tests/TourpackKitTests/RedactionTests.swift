import Foundation
import Testing

@testable import TourpackHTTP

/// Every spelling of a secret a server may echo is taken out (issue 27, defect 2).
@Suite struct RedactionTests {
    static let key = "Tk+Tile/Key=Wq8"

    @Test(
        "A key is redacted raw, percent-encoded (either hex case, twice over), form-encoded, case-folded and JSON-escaped",
        arguments: [
            "Tk+Tile/Key=Wq8",
            "Tk%2BTile%2FKey%3DWq8",
            "Tk%2bTile%2fKey%3dWq8",
            "tk%2btile%2fkey%3dwq8",
            "TK%2BTILE%2FKEY%3DWQ8",
            "Tk%252BTile%252FKey%253DWq8",
            "Tk+Tile\\/Key=Wq8",
            "Tk\\u002bTile\\u002FKey\\u003dWq8",
            "Tk%2BTile/Key%3DWq8",
            "tk+tile/key=wq8",
        ])
    func everySpelling(_ echoed: String) {
        let key = APIKey(Self.key)!
        let text = "403 Forbidden: GET /12/2170/1420.png?key=\(echoed)&style=x is not allowed"
        #expect(key.scrub(text) == "403 Forbidden: GET /12/2170/1420.png?key=<redacted>&style=x is not allowed", "\(echoed)")
    }

    @Test("A space in a secret is matched as + (form encoding) and %20, and text without the secret is left alone")
    func spacesAndNonMatches() {
        #expect(Redaction.scrub("a=open+sesame+42;b=open%20sesame%2042", secrets: ["open sesame 42"]) == "a=<redacted>;b=<redacted>")
        let text = "Tk+Tile/Key=Wq9 and %2 and \\ and \\u00"
        #expect(Redaction.scrub(text, secrets: [Self.key]) == text)
        #expect(Redaction.scrub("", secrets: [Self.key]) == "")
    }

    @Test("AWS signing scrubs both halves through the same redaction")
    func signing() {
        let signing = AWSSigning(region: "us-east-1", service: "s3", accessKey: "AKIDEXAMPLE", secretKey: "wJal/rXUtnFEMI+K7MDENG")
        #expect(signing.scrub("akidexample wJal%2FrXUtnFEMI%2BK7MDENG") == "<redacted> <redacted>")
    }
}
