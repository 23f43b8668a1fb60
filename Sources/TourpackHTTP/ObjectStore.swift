import Crypto
package import Foundation
package import TourpackCore

/// An S3-compatible bucket as the shared synthesis cache sees it: whole
/// objects put once, read back verified, over the project's libcurl
/// transport with libcurl's own SigV4 signing (`CURLOPT_AWS_SIGV4`).
///
/// - `put` writes with `If-None-Match: *`: a chunk is stored once across the
///   fleet, and a 412 (another worker stored it first) is success.
/// - Every put carries `Content-MD5` (the server refuses a body damaged in
///   transit), `x-amz-content-sha256` (SigV4's payload hash) and the body's
///   SHA-256 as metadata (`x-amz-meta-sha256`).
/// - `get` hashes what came back against that metadata: a damaged object,
///   one without the metadata, or a missing one is a miss (nil), never an
///   error. Errors are for a store that cannot be reached or refuses us.
/// - URLs are path-style (`endpoint/bucket/prefix+key`), which AWS, MinIO
///   and moto all serve; virtual-hosted names would need DNS per bucket.
/// - The keys are read from the environment once, when the store is made,
///   and appear in no message: every text from the server is scrubbed.
///
/// Bodies travel in memory: a chunk's FLAC is a few hundred kilobytes.
package final class ObjectStore: Sendable {
    /// What a put did.
    package enum PutOutcome: Sendable, Equatable {
        /// This call stored the object.
        case stored
        /// The object was already there (412 to `If-None-Match: *`): another
        /// worker stored it first, which is as good.
        case alreadyStored
    }

    /// What `head` reports about an object.
    package struct ObjectInfo: Sendable, Equatable {
        package var bytes: Int
        /// The `x-amz-meta-sha256` recorded at put, if any.
        package var sha256: String?
    }

    package let settings: ObjectStoreSettings
    private let signing: AWSSigning
    private let transport: HTTPTransport
    /// Tries for an exchange that failed on the way (a reset, a timeout, 5xx).
    private let attempts = 3

    /// Reads the keys from the variables the settings name, once.
    /// - Throws: `TourpackError.invalidInput` naming the variable (never
    ///   its value) when one is unset or empty.
    /// - Parameter section: the pipeline's section, for messages (`state.objects`, `publish.target.s3`).
    package convenience init(
        settings: ObjectStoreSettings, environment: [String: String] = ProcessInfo.processInfo.environment,
        section: String = "state.objects"
    ) throws {
        guard let access = environment[settings.accessKeyEnv], !access.isEmpty else {
            throw TourpackError.invalidInput("\(section): the access key variable $\(settings.accessKeyEnv) is not set")
        }
        guard let secret = environment[settings.secretKeyEnv], !secret.isEmpty else {
            throw TourpackError.invalidInput("\(section): the secret key variable $\(settings.secretKeyEnv) is not set")
        }
        self.init(settings: settings, signing: AWSSigning(region: settings.region, service: "s3", accessKey: access, secretKey: secret))
    }

    init(settings: ObjectStoreSettings, signing: AWSSigning) {
        self.settings = settings
        self.signing = signing
        transport = HTTPTransport(maxConnections: 4)
    }

    // MARK: Operations

    /// Stores `bytes` as `key` unless an object is already there.
    @discardableResult
    package func put(_ key: String, bytes: [UInt8]) async throws -> PutOutcome {
        try await write(key, bytes: bytes, condition: .absent) ? .stored : .alreadyStored
    }

    /// When a write may replace what is there.
    package enum WriteCondition: Sendable, Equatable {
        /// Only when there is no object (`If-None-Match: *`): immutable objects.
        case absent
        /// Only when the object is still the one with this ETag (`If-Match`):
        /// a read, change, write that loses no one else's change.
        case unchanged(etag: String)
        /// Always: an object whose every version is equally good.
        case always
    }

    /// Stores `bytes` as `key` when `condition` holds; false, storing
    /// nothing, when it does not (412). Every write carries `Content-MD5`
    /// (the server refuses a body damaged on the way) and the body's SHA-256
    /// as metadata (`x-amz-meta-sha256`), which `fetch` checks.
    /// - Parameters:
    ///   - contentType: what a CDN serves it as.
    ///   - cacheControl: how long a CDN and a device may keep it.
    @discardableResult
    package func write(
        _ key: String, bytes: [UInt8], contentType: String = "application/octet-stream", cacheControl: String? = nil,
        condition: WriteCondition
    ) async throws -> Bool {
        let digest = SHA256.hash(data: bytes).lowercaseHex
        var headers = [
            (name: "Content-Type", value: contentType),
            (name: "Content-MD5", value: Data(Insecure.MD5.hash(data: bytes)).base64EncodedString()),
            (name: "x-amz-meta-sha256", value: digest),
        ]
        if let cacheControl { headers.append((name: "Cache-Control", value: cacheControl)) }
        switch condition {
        case .absent: headers.append((name: "If-None-Match", value: "*"))
        case .unchanged(let etag): headers.append((name: "If-Match", value: etag))
        case .always: break
        }
        let response = try await exchange(.put, key, body: bytes, payloadSHA256: digest, headers: headers, operation: "PUT")
        switch response.status {
        case 200..<300: return true
        // 409: S3's answer when a conditional write races another on the same key.
        case 412, 409:
            guard condition != .always else { throw failure("PUT", key, response) }
            return false
        default: throw failure("PUT", key, response)
        }
    }

    /// An object as it was read: its bytes and the ETag that names this version.
    package struct Versioned: Sendable, Equatable {
        package var bytes: [UInt8]
        package var etag: String

        package init(bytes: [UInt8], etag: String) {
            self.bytes = bytes
            self.etag = etag
        }
    }

    /// The object's bytes and ETag, or nil when it is missing. Unlike
    /// `fetch`, it asks for no recorded SHA-256: the caller checks what
    /// it reads (a catalogue, by its signature and its parse).
    package func read(_ key: String) async throws -> Versioned? {
        let response = try await exchange(.get, key, operation: "GET")
        switch response.status {
        case 200: return Versioned(bytes: response.body, etag: response.headers["etag"] ?? "")
        case 404: return nil
        default: throw failure("GET", key, response)
        }
    }

    /// One object in a listing.
    package struct Listed: Sendable, Equatable {
        /// The key, without the store's prefix.
        package var key: String
        package var bytes: Int
        package var lastModified: Date

        package init(key: String, bytes: Int, lastModified: Date) {
            self.key = key
            self.bytes = bytes
            self.lastModified = lastModified
        }
    }

    /// Every object whose key (after the store's prefix) starts with
    /// `prefix`, page after page (ListObjectsV2), in key order.
    package func list(prefix: String) async throws -> [Listed] {
        var listed: [Listed] = []
        var token: String?
        repeat {
            // Query parameters sorted and encoded, as SigV4's canonical request has them.
            var query: [(String, String)] = []
            if let token { query.append(("continuation-token", token)) }
            query.append(("list-type", "2"))
            query.append(("prefix", settings.prefix + prefix))
            let url = bucketURL + "?" + query.map { "\($0)=\(Self.encodeQueryValue($1))" }.joined(separator: "&")
            let response = try await exchange(.get, url: url, key: prefix, operation: "LIST")
            guard response.status == 200 else { throw failure("LIST", prefix, response) }
            let xml = String(decoding: response.body, as: UTF8.self)
            for contents in Self.elements("Contents", in: xml) {
                guard let key = Self.element("Key", in: contents).map(Self.unescapeXML), key.hasPrefix(settings.prefix) else { continue }
                listed.append(
                    Listed(
                        key: String(key.dropFirst(settings.prefix.count)),
                        bytes: Self.element("Size", in: contents).flatMap(Int.init) ?? 0,
                        lastModified: Self.element("LastModified", in: contents).flatMap(Self.parseTimestamp) ?? .distantPast))
            }
            token =
                Self.element("IsTruncated", in: xml) == "true" ? Self.element("NextContinuationToken", in: xml).map(Self.unescapeXML) : nil
        } while token != nil
        return listed
    }

    /// Stores the file at `url` as `key` unless an object is already there.
    @discardableResult
    package func put(_ key: String, file url: URL) async throws -> PutOutcome {
        let bytes: [UInt8]
        do { bytes = Array(try Data(contentsOf: url)) } catch {
            throw TourpackError.storageFailed(
                path: url.path, errno: (error as NSError).code == NSFileReadNoSuchFileError ? ENOENT : EIO, operation: "read")
        }
        return try await put(key, bytes: bytes)
    }

    /// What a read found.
    package enum Fetched: Sendable, Equatable {
        /// The bytes, matching the SHA-256 recorded at put.
        case found([UInt8])
        case missing
        /// There, but not matching its SHA-256, or without one.
        case damaged
    }

    /// The object as `Fetched` says.
    package func fetch(_ key: String) async throws -> Fetched {
        let response = try await exchange(.get, key, operation: "GET")
        switch response.status {
        case 200:
            guard let recorded = response.headers["x-amz-meta-sha256"]?.lowercased(),
                recorded == SHA256.hash(data: response.body).lowercaseHex
            else { return .damaged }
            return .found(response.body)
        case 404: return .missing
        default: throw failure("GET", key, response)
        }
    }

    /// The object's bytes when it is there and matches the SHA-256 recorded
    /// at put; nil when it is missing, damaged, or carries no SHA-256.
    package func get(_ key: String) async throws -> [UInt8]? {
        if case .found(let bytes) = try await fetch(key) { return bytes }
        return nil
    }

    /// Writes the object to `url` (replacing it) when `get` would return it;
    /// false, writing nothing, on a miss.
    package func get(_ key: String, to url: URL) async throws -> Bool {
        guard let bytes = try await get(key) else { return false }
        do { try Data(bytes).write(to: url, options: .atomic) } catch {
            throw TourpackError.storageFailed(path: url.path, errno: EIO, operation: "write")
        }
        return true
    }

    /// The object's size and recorded SHA-256, or nil when it is missing.
    package func head(_ key: String) async throws -> ObjectInfo? {
        let response = try await exchange(.head, key, operation: "HEAD")
        switch response.status {
        case 200:
            return ObjectInfo(
                bytes: response.headers["content-length"].flatMap(Int.init) ?? 0, sha256: response.headers["x-amz-meta-sha256"])
        case 404: return nil
        default: throw failure("HEAD", key, response)
        }
    }

    /// Removes the object; a missing one is already removed.
    package func delete(_ key: String) async throws {
        let response = try await exchange(.delete, key, operation: "DELETE")
        guard (200..<300).contains(response.status) || response.status == 404 else { throw failure("DELETE", key, response) }
    }

    // MARK: Requests

    /// The object's path-style URL: the endpoint, the bucket, then the
    /// prefix and key, each segment percent-encoded once (as SigV4 for S3
    /// signs it).
    func url(for key: String) -> String {
        let base = settings.endpoint.hasSuffix("/") ? String(settings.endpoint.dropLast()) : settings.endpoint
        return base + "/" + Self.encodePath(settings.bucket) + "/" + Self.encodePath(settings.prefix + key)
    }

    /// One signed exchange, tried again on a failure on the way or a 5xx.
    /// Any other status is the caller's to read.
    func exchange(
        _ method: HTTPRequestSpec.Method, _ key: String, body: [UInt8] = [], payloadSHA256: String? = nil,
        headers extra: [(name: String, value: String)] = [], operation: String
    ) async throws -> HTTPResponse {
        try await exchange(
            method, url: url(for: key), key: key, body: body, payloadSHA256: payloadSHA256, headers: extra, operation: operation)
    }

    /// The bucket's own URL (for listings).
    var bucketURL: String {
        (settings.endpoint.hasSuffix("/") ? String(settings.endpoint.dropLast()) : settings.endpoint) + "/"
            + Self.encodePath(settings.bucket)
    }

    func exchange(
        _ method: HTTPRequestSpec.Method, url: String, key: String, body: [UInt8] = [], payloadSHA256: String? = nil,
        headers extra: [(name: String, value: String)] = [], operation: String
    ) async throws -> HTTPResponse {
        // S3 wants the payload hash in its own header on every request;
        // libcurl signs every header given here.
        let headers = [(name: "x-amz-content-sha256", value: payloadSHA256 ?? SHA256.hash(data: body).lowercaseHex)] + extra
        var request = HTTPRequestSpec(
            method: method, url: url, headers: headers, body: body,
            totalTimeoutSeconds: 60, connectTimeoutSeconds: 10, stallTimeoutSeconds: 30)
        request.signing = signing
        var lastFailure: (any Error)?
        for attempt in 1...attempts {
            if attempt > 1 { try await Task.sleep(for: .milliseconds(200 * (1 << (attempt - 2)))) }
            switch await transport.perform(request) {
            case .success(let response) where response.status >= 500 && attempt < attempts:
                lastFailure = failure(operation, key, response)
            case .success(let response):
                return response
            case .failure(let transportFailure):
                if case .cancelled = transportFailure { throw TourpackError.cancelled }
                if case .cancelledAfterAnswer = transportFailure { throw TourpackError.cancelled }
                let error = TourpackError.objectStorageFailed(
                    operation: operation, object: Secret.redacting(url: url),
                    status: transportFailure.answeredStatus, message: signing.scrub(transportFailure.reason))
                guard transportFailure.isRetryable else { throw error }
                lastFailure = error
            }
        }
        throw lastFailure ?? TourpackError.cancelled
    }

    /// The error for a status the operation does not expect, with S3's
    /// `<Code>` and `<Message>` when the body is its XML error.
    private func failure(_ operation: String, _ key: String, _ response: HTTPResponse) -> TourpackError {
        let text = String(decoding: response.body.prefix(4096), as: UTF8.self)
        let code = Self.element("Code", in: text).map { String($0.prefix(300)) }
        let message = Self.element("Message", in: text).map { String($0.prefix(300)) }
        let summary = [code, message].compactMap { $0 }.joined(separator: ": ")
        return .objectStorageFailed(
            operation: operation, object: Secret.redacting(url: url(for: key)), status: response.status,
            message: signing.scrub(summary.isEmpty ? "no message" : summary))
    }

    private static func element(_ name: String, in xml: String) -> String? {
        guard let start = xml.range(of: "<\(name)>"), let end = xml.range(of: "</\(name)>", range: start.upperBound..<xml.endIndex) else {
            return nil
        }
        let value = xml[start.upperBound..<end.lowerBound].trimmingCharacters(in: .whitespacesAndNewlines)
        return value.isEmpty ? nil : value
    }

    /// Every `<name>…</name>` in `xml`, in order.
    static func elements(_ name: String, in xml: String) -> [String] {
        var found: [String] = []
        var rest = xml[...]
        while let start = rest.range(of: "<\(name)>"), let end = rest.range(of: "</\(name)>", range: start.upperBound..<rest.endIndex) {
            found.append(String(rest[start.upperBound..<end.lowerBound]))
            rest = rest[end.upperBound...]
        }
        return found
    }

    static func unescapeXML(_ text: String) -> String {
        text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }

    /// S3's `LastModified`: ISO 8601 in UTC, with or without milliseconds.
    static func parseTimestamp(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    /// A query value as SigV4 canonicalizes it: unreserved characters pass, every other byte is `%XX` (`/` too).
    static func encodeQueryValue(_ value: String) -> String {
        encodePath(value).replacingOccurrences(of: "/", with: "%2F")
    }

    /// RFC 3986 unreserved characters and `/` pass; every other byte is `%XX`.
    static func encodePath(_ path: String) -> String {
        var encoded = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                encoded += String(format: "%%%02X", byte)
            }
        }
        return encoded
    }

    static func sha256Hex(_ bytes: [UInt8]) -> String { SHA256.hash(data: bytes).lowercaseHex }

}
