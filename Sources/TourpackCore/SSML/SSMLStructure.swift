/// The shape of an SSML document, read off the scanner's tokens: one
/// `<speak>` root, every element closed in the order it was opened, and
/// nothing but whitespace after the root.
///
/// The chunker uses it too: `rootTag` and `content` say where the root's
/// opening tag is and which tokens lie inside it, so each chunk can be
/// rewrapped in the same `<speak …>` the writer used.
package struct SSMLStructure {
    package private(set) var problems: [SSMLProblem] = []
    /// The index of the root element's start tag among the scanner's tokens.
    package private(set) var rootTag: Int?
    /// The tokens between the root's start and end tags, once the root is closed.
    package private(set) var content: Range<Int>?

    package init(scanner: SSMLScanner) {
        let tokens = scanner.tokens
        var stack: [(name: String, token: Int)] = []
        var rootName = "speak"
        var rootClosed = false
        var reportedTextBefore = false
        var problems: [SSMLProblem] = []
        var rootTag: Int?
        var content: Range<Int>?

        func report(_ message: String, _ token: Int) {
            let offset = tokens[token].range.lowerBound
            problems.append(SSMLProblem(message: "malformed SSML: " + message, offset: scanner.position(offset)))
        }
        func at(_ token: Int) -> Int { scanner.position(tokens[token].range.lowerBound) }
        func isBlank(_ token: SSMLToken) -> Bool {
            token.kind == .text && scanner.scalars[token.range].allSatisfy(SSMLScanner.isSpace)
        }

        for (index, token) in tokens.enumerated() {
            if rootClosed {
                if isBlank(token) { continue }
                var first = token.range.lowerBound
                while first < token.range.upperBound - 1, SSMLScanner.isSpace(scanner.scalars[first]) { first += 1 }
                problems.append(
                    SSMLProblem(
                        message:
                            "malformed SSML: there is more after </\(rootName)> at character \(scanner.position(first)); nothing but whitespace may follow it",
                        offset: scanner.position(first)))
                break
            }
            switch token.kind {
            case .declaration, .refused, .comment:
                continue
            case .text, .entity, .cdata:
                if stack.isEmpty && !isBlank(token) && !reportedTextBefore {
                    report("text at character \(at(index)) comes before <speak>; SSML narration must start with <speak>", index)
                    reportedTextBefore = true
                }
            case .startTag(let name, let selfClosing):
                if rootTag == nil {
                    rootTag = index
                    rootName = name
                    if name != "speak" {
                        report("the document must start with <speak>, not <\(name)> (character \(at(index)))", index)
                    }
                } else if name == "speak" {
                    report("<speak> at character \(at(index)) is inside another <speak>; a document has only one", index)
                }
                if !selfClosing {
                    stack.append((name, index))
                } else if stack.isEmpty {
                    rootClosed = true
                    content = index + 1..<index + 1
                }
            case .endTag(let name):
                guard let top = stack.last else {
                    report("</\(name)> at character \(at(index)) closes nothing", index)
                    continue
                }
                if top.name == name {
                    stack.removeLast()
                } else if let match = stack.lastIndex(where: { $0.name == name }) {
                    for open in stack[(match + 1)...].reversed() {
                        report(
                            "<\(open.name)> opened at character \(at(open.token)) is never closed (</\(name)> at character \(at(index)) comes first)",
                            open.token)
                    }
                    stack.removeSubrange(match...)
                } else {
                    report("</\(name)> at character \(at(index)) does not match <\(top.name)> opened at character \(at(top.token))", index)
                    continue
                }
                if stack.isEmpty, let root = rootTag {
                    rootClosed = true
                    content = root + 1..<index
                }
            }
        }
        if rootTag == nil {
            problems.append(
                SSMLProblem(
                    message: "malformed SSML: there is no <speak> element; SSML narration must be one <speak>…</speak> document",
                    offset: 1))
        }
        for open in stack {
            report("<\(open.name)> opened at character \(at(open.token)) is never closed", open.token)
        }
        self.problems = problems
        self.rootTag = rootTag
        self.content = content
    }
}
