import Testing

@testable import TourpackCore
@testable import TourpackKit

@Suite struct SSMLEscapeTests {
    @Test func escapesTheFiveXMLCharacters() {
        #expect(
            SSML.escape(#"Tom & Jerry <3 "Käse" it's > x"#)
                == "Tom &amp; Jerry &lt;3 &quot;Käse&quot; it&apos;s &gt; x")
    }

    /// The words a provider that reads no markup is sent: `&amp;` decoded
    /// last, so an escaped entity stays one.
    @Test func plainTextDropsTheMarkupAndDecodesEachEntityOnce() {
        #expect(SSML.plainText(#"<speak>Tom &amp;lt;3 <break time="1s"/> &quot;Käse&quot;</speak>"#) == #"Tom &lt;3 "Käse""#)
        #expect(Chunk(text: "a &amp; b", isSSML: false).plainText == "a &amp; b")
    }

    @Test func leavesEverythingElseAlone() {
        let text = "Grüße aus Zürich 🏔️ e\u{301}té 東京。"
        #expect(SSML.escape(text) == text)
    }

    @Test func escapedTextIsWellFormedInsideSpeak() {
        let nasty = #"<speak>&amp; </speak> & < > " ' &#0; ]]>"#
        #expect(SSML.validate("<speak>" + SSML.escape(nasty) + "</speak>").isEmpty)
    }

    @Test func escapedSizeMatchesTheEscapedString() {
        let text = #"a&b<c>d"e'f ü 🏔️"#
        #expect(SSML.escapedUTF8Count(text.unicodeScalars) == SSML.escape(text).utf8.count)
        #expect(SSML.escapedScalarCount(text.unicodeScalars) == SSML.escape(text).unicodeScalars.count)
    }
}

@Suite struct SSMLNothingToSpeakTests {
    @Test(arguments: [
        "<speak/>",
        "<speak></speak>",
        #"<speak><break time="2s"/> <break strength="strong"/></speak>"#,
        "<speak>\n  <p> <s>\t</s> </p>\n</speak>",
        "<speak><!-- only a note --><![CDATA[   ]]>&#32;&#xA0;</speak>",
        #"<?xml version="1.0"?><speak><prosody rate="slow"><break time="1s"/></prosody></speak>"#,
    ])
    func tagsAndWhitespaceAloneSayNothing(_ text: String) {
        #expect(SSML.validate(text) == [])
        #expect(SSML.hasNothingToSpeak(text))
    }

    @Test(arguments: [
        #"<speak><break time="1s"/>Go.</speak>"#,
        "<speak>&amp;</speak>",
        "<speak><![CDATA[a < b]]></speak>",
        #"<speak><say-as interpret-as="characters">ORF</say-as></speak>"#,
    ])
    func anyTextIsSomethingToSay(_ text: String) {
        #expect(!SSML.hasNothingToSpeak(text))
    }
}

@Suite struct SSMLValidateTests {
    @Test(arguments: [
        #"<speak>Hello.</speak>"#,
        #"  <speak>Leading and trailing whitespace.</speak>\#n  "#,
        #"<?xml version="1.0" encoding="UTF-8"?><speak version="1.1" xml:lang="de-AT">Servus.</speak>"#,
        #"<speak>Pause <break time="500ms"/> here, and <break strength='strong' /> there.</speak>"#,
        #"<speak>Call <say-as interpret-as="characters">ORF</say-as> now.</speak>"#,
        #"<speak><sub alias="Kaiser Franz Josef">K.-F.-J.</sub>-Höhe</speak>"#,
        #"<speak><p><s>One.</s><s>Two.</s></p><p>Three.</p></speak>"#,
        #"<speak><prosody rate="slow" pitch="-2st">Slowly <emphasis level="strong">now</emphasis>.</prosody></speak>"#,
        #"<speak>Tom &amp; Jerry &lt;3 &gt; &quot;x&quot; &apos;y&apos; caf&#233; caf&#xE9; &#x1F3D4;</speak>"#,
        #"<speak><!-- a note for writers --> Text <![CDATA[a < b & c]]> end.</speak>"#,
        #"<speak><audio src="https://example.com/a.mp3?x=1&amp;y=2">fallback</audio></speak>"#,
        "<speak/>",
    ])
    func acceptsWellFormed(_ text: String) {
        #expect(SSML.validate(text) == [])
    }

    @Test(arguments: [
        (
            #"<speak>Hello <emphasis>world</speak>"#,
            ["<emphasis> opened at character 14 is never closed (</speak> at character 29 comes first)"]
        ),
        (
            #"<speak>Hello <emphasis>world</emphasis>"#,
            ["<speak> opened at character 1 is never closed"]
        ),
        (
            #"<speak><p><s>One.</p></s></speak>"#,
            [
                "<s> opened at character 11 is never closed (</p> at character 18 comes first)",
                "</s> at character 22 does not match <speak> opened at character 1",
            ]
        ),
        (
            #"<p>Hello</p>"#,
            ["the document must start with <speak>, not <p> (character 1)"]
        ),
        (
            #"Hello <speak>x</speak>"#,
            ["text at character 1 comes before <speak>; SSML narration must start with <speak>"]
        ),
        (
            #"<speak>Tom & Jerry</speak>"#,
            ["stray & at character 12; write &amp; for a literal &"]
        ),
        (
            #"<speak>3 < 4</speak>"#,
            ["stray < at character 10; write &lt; for a literal <"]
        ),
        (
            #"<speak>caf&eacute;</speak>"#,
            ["&eacute; at character 11 is not an XML entity; SSML knows only &amp; &lt; &gt; &quot; &apos; and numeric ones such as &#233;"]
        ),
        (
            #"<speak>&#0; and &#12 x</speak>"#,
            [
                "&#0; at character 8 is not a character XML allows",
                "the character reference at character 17 is incomplete; it must look like &#233; or &#xE9;",
            ]
        ),
        (
            #"<speak><break time=500ms/></speak>"#,
            [#"the value of time in <break> at character 8 must be in quotes, as in time="…""#]
        ),
        (
            #"<speak><break time="500ms/></speak>"#,
            [
                #"the value of time in <break> at character 8 has no closing " before the next tag (a literal < in a value must be written &lt;)"#
            ]
        ),
        (
            #"<speak><break time="1s" time="2s"/></speak>"#,
            ["the attribute time appears twice in <break> at character 8"]
        ),
        (
            #"<speak><prosody rate="slow"pitch="low">x</prosody></speak>"#,
            ["the attributes of <prosody> at character 8 must be separated by spaces"]
        ),
        (
            #"<speak><emphasis level>x</emphasis></speak>"#,
            [#"the attribute level of <emphasis> at character 8 has no value; write level="…""#]
        ),
        (
            #"<speak></p></speak>"#,
            ["</p> at character 8 does not match <speak> opened at character 1"]
        ),
        (
            #"<speak>Hi</speak> and more"#,
            ["there is more after </speak> at character 19; nothing but whitespace may follow it"]
        ),
        (
            #"<speak>Hi</speak><speak>again</speak>"#,
            ["there is more after </speak> at character 18; nothing but whitespace may follow it"]
        ),
        (
            #"<!DOCTYPE speak><speak>x</speak>"#,
            ["<! at character 1 (such as <!DOCTYPE>) is not allowed in narration SSML; use elements, text and comments only"]
        ),
        (
            #"<speak><!-- note x</speak>"#,
            [
                "<speak> opened at character 1 is never closed",
                "the comment opened at character 8 is never closed (missing -->)",
            ]
        ),
        (
            #"<speak><speak>x</speak></speak>"#,
            ["<speak> at character 8 is inside another <speak>; a document has only one"]
        ),
        ("", ["there is no <speak> element; SSML narration must be one <speak>…</speak> document"]),
        (
            #"<speak><break time="1s"</speak>"#,
            ["the tag <break> at character 8 is not closed with >"]
        ),
        (
            #"<speak><break time="1s" ,/> x</speak>"#,
            ["unexpected , in the tag <break> at character 8"]
        ),
    ])
    func reportsMalformed(_ text: String, _ expected: [String]) {
        #expect(SSML.validate(text).map(\.message) == expected.map { "malformed SSML: " + $0 })
    }

    @Test func offsetsCountCharactersNotBytes() {
        // "Grüße 🏔️ " is 8 characters but 17 UTF-8 bytes and 9 scalars.
        let problems = SSML.validate("<speak>Grüße 🏔️ <emphasis>x</speak>")
        #expect(problems.map(\.offset) == [16])
        #expect(problems.first?.message.contains("<emphasis> opened at character 16") == true)
    }
}
