package import Foundation
import TourpackPackage

/// One file's download over HTTP, tried until it is whole: the resume and
/// retry rules that both transports follow (`URLSessionSiteSource` for the
/// app, the libcurl `HTTPSiteSource` for `tourpack install`). A transport
/// only moves bytes; this decides what to ask for, which answers may write
/// to the file, and when to give up.
///
/// - A file that holds N bytes is asked for with `Range: bytes=N-` and
///   `If-Range` on the validator its first bytes came with. A 206 must
///   continue exactly at N (`Content-Range`), a 200 starts the file over,
///   and the head is judged before any body byte is written (`ResumeTry.accept`).
/// - A wrong `Content-Range`, a 206 to a request without a range, or another
///   2xx is a failed try: nothing of its body is written.
/// - The count of failed tries starts afresh only when the file holds more
///   bytes than it ever did during this download: bytes that could be kept.
///   A server that cuts every answer short, or that ignores `Range` and
///   cuts its 200 before the bytes already held, makes no progress, so its
///   tries run out (`TransferPolicy.maximumAttempts`).
/// - The file's overall deadline (`TransferPolicy.fileDeadlineSeconds`)
///   bounds every try and every wait between them, progress or not: a
///   trickle that keeps bringing bytes still ends there.
/// - Running out of tries or time is `SiteSourceFailure.Kind.unreachable`,
///   which the installer reports as `networkUnavailable`.
package struct ResumableDownload: Sendable {
    package let file: URL
    package let validatorFile: URL
    package let size: Int64
    /// The file's URL without query or user info, for messages.
    package let url: String
    private var tries: TransferTries
    /// The most bytes the file has held since this download began.
    private var mostHeld: Int64

    package init(file: URL, size: Int64, policy: TransferPolicy, url: String) {
        self.file = file
        validatorFile = file.appendingPathExtension("validator")
        self.size = size
        self.url = url
        tries = TransferTries(policy)
        // Bytes an earlier run left count as held only when they can be continued.
        let held = InstallFolder.size(of: file)
        mostHeld = held <= size && FileManager.default.fileExists(atPath: validatorFile.path) ? held : 0
    }

    package var policy: TransferPolicy { tries.policy }

    /// The seconds left of the file's deadline: the longest the next try may run.
    package var secondsLeft: Double { tries.secondsLeft }

    /// What the next try asks for, after dropping bytes that cannot be
    /// continued (more than the file has, or no validator to resume them
    /// with); nil when the file is whole and nothing need be asked.
    package mutating func nextTry() throws -> ResumeTry? {
        var have = InstallFolder.size(of: file)
        let validator = (try? String(contentsOf: validatorFile, encoding: .utf8)).flatMap { $0.isEmpty ? nil : $0 }
        if have > size || (have > 0 && validator == nil) {
            try startOver()
            have = 0
        }
        if size == 0 {
            try startOver()
            guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
                throw SiteSourceFailure(
                    .storage(path: file.path, reason: "cannot create it"), url: url, reason: "cannot create \(file.path)")
            }
            return nil
        }
        if have == size { return nil }
        var headers: [(name: String, value: String)] = [(name: "Accept-Encoding", value: "identity")]
        if have > 0, let validator {
            headers.append((name: "Range", value: "bytes=\(have)-"))
            headers.append((name: "If-Range", value: validator))
        }
        return ResumeTry(file: file, validatorFile: validatorFile, have: have, size: size, headers: headers)
    }

    /// How a try ended, as its transport saw it.
    package enum Ending: Sendable, Equatable {
        /// The answer came to its end with this 2xx status (the file whole, or short of it).
        case ended(status: Int)
        /// 416: the bytes held are not a prefix the server can continue.
        case unsatisfiable
        /// A failed try worth another: a cut connection, a stall, a timeout,
        /// a refused head (wrong `Content-Range`), 408, 429, 5xx.
        case failed(status: Int?, reason: String, retryAfter: Double?)
    }

    /// The wait before the next try, and why the last one failed.
    package struct Retry: Sendable, Equatable {
        package var seconds: Double
        package var reason: String
    }

    /// After a try: nil when the file is whole, else the wait before the
    /// next try. Throws `unreachable` when the tries or the deadline are spent.
    package mutating func settle(_ ending: Ending) throws -> Retry? {
        let now = InstallFolder.size(of: file)
        if now > mostHeld {
            mostHeld = now
            tries.progressed()
        }
        let status: Int?
        let reason: String
        var retryAfter: Double?
        switch ending {
        case .ended(let code):
            if now == size { return nil }
            if now > size { try startOver() }
            (status, reason) = (code, "the answer ended at byte \(now) of \(size)")
        case .unsatisfiable:
            try startOver()
            (status, reason) = (416, "the range asked for is not satisfiable")
        case .failed(let code, let why, let after):
            (status, reason, retryAfter) = (code, why, after)
        }
        let seconds = try tries.delay(status: status, reason: reason, retryAfter: retryAfter, url: url)
        return Retry(seconds: seconds, reason: reason)
    }

    package func startOver() throws {
        try AtomicFile.remove(file)
        try AtomicFile.remove(validatorFile)
    }
}

/// One try of a `ResumableDownload`: what to ask for, and the judge of the answer's head.
package struct ResumeTry: Sendable {
    package let file: URL
    package let validatorFile: URL
    /// The bytes the file holds: the range starts here.
    package let have: Int64
    /// The file's whole length, as its signed package.json names it: no answer writes past it.
    package let size: Int64
    /// `Accept-Encoding: identity`, and `Range` with `If-Range` when resuming.
    package let headers: [(name: String, value: String)]

    /// What an answer's head means for the file.
    package enum Verdict: Sendable, Equatable {
        /// Not a 2xx: the body is the server's message, not the file.
        case message
        /// 200: the file was emptied, and the body is the file from byte 0.
        case fromStart
        /// 206 continuing the file at `have`: the body is appended.
        case continuing
        /// A failed try: none of the body may be written.
        case refused(String)
        /// The file could not be prepared for the body.
        case unwritable(path: String, reason: String)
    }

    /// Judges an answer's head before any body byte is written, and
    /// prepares the file for the body: a 200 empties it, and a 2xx keeps
    /// its validator (`ETag`, else `Last-Modified`) so that a body cut short
    /// can be resumed. `headers`' names are lowercased.
    package func accept(status: Int, headers: [String: String]) -> Verdict {
        guard (200..<300).contains(status) else { return .message }
        switch status {
        case 200: break
        case 206:
            guard have > 0, Self.continues(headers["content-range"], from: have, total: size) else {
                return .refused(
                    "a range that does not continue the file at byte \(have) (Content-Range: \(headers["content-range"] ?? "none"))")
            }
        default:
            return .refused("HTTP \(status) is not a file's answer")
        }
        do {
            if status == 200 {
                try AtomicFile.remove(file)
                try AtomicFile.remove(validatorFile)
            }
            if let tag = headers["etag"] ?? headers["last-modified"] { try Data(tag.utf8).write(to: validatorFile) }
        } catch {
            return .unwritable(path: file.path, reason: "\(error)")
        }
        return status == 200 ? .fromStart : .continuing
    }

    /// Whether `Content-Range: bytes a-b/total` continues a file of `have` bytes of `total`.
    package static func continues(_ header: String?, from have: Int64, total: Int64) -> Bool {
        guard let header, header.lowercased().hasPrefix("bytes ") else { return false }
        let parts = header.dropFirst("bytes ".count).split(separator: "/")
        guard parts.count == 2, let dash = parts[0].firstIndex(of: "-"),
            let start = Int64(parts[0][..<dash].trimmingCharacters(in: .whitespaces)),
            let end = Int64(parts[0][parts[0].index(after: dash)...].trimmingCharacters(in: .whitespaces))
        else { return false }
        let whole = parts[1].trimmingCharacters(in: .whitespaces)
        return start == have && end >= start && end < total && (whole == "*" || Int64(whole) == total)
    }
}
