import Foundation
import Testing
import TourpackTesting

@testable import TourpackAudio
@testable import TourpackCore
@testable import TourpackHTTP
@testable import TourpackKit
@testable import TourpackState

#if canImport(Glibc)
import Glibc
#endif

/// The shared moto server, for one test at a time, always stopped,
/// whatever the test did; and a store on a bucket of it.
extension MotoTestServer {
    /// Runs `body` against a fresh server.
    static func with<T>(environment: [String: String] = [:], _ body: (MotoTestServer) async throws -> T) async throws -> T {
        let server = try await start(environment: environment)
        defer { server.stop() }
        return try await body(server)
    }

    /// A store on a new bucket of this server, keys from a fake environment.
    func store(bucket: String = "tourpack-\(UUID().uuidString.prefix(8).lowercased())", prefix: String = "synthesis/") async throws
        -> ObjectStore
    {
        let settings = ObjectStoreSettings(endpoint: endpoint, bucket: bucket, prefix: prefix, region: "us-east-1")
        let store = try ObjectStore(settings: settings, environment: ObjectStoreTests.environment)
        // Creating the bucket is the operator's job; the test does it with a signed PUT of the bucket itself.
        var request = HTTPRequestSpec(
            method: .put, url: "\(endpoint)/\(bucket)", headers: [(name: "x-amz-content-sha256", value: ObjectStoreTests.emptySHA256)],
            body: [], totalTimeoutSeconds: 10, connectTimeoutSeconds: 5, stallTimeoutSeconds: 5)
        request.signing = AWSSigning(
            region: "us-east-1", service: "s3", accessKey: ObjectStoreTests.accessKey, secretKey: ObjectStoreTests.secretKey)
        let created = try await HTTPTransport(maxConnections: 1).perform(request).get()
        guard created.status == 200 else { throw TestFailure("could not create bucket \(bucket): HTTP \(created.status)") }
        return store
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

@Suite(.serialized, .offThePool) struct ObjectStoreTests {
    /// Obviously fake keys; the secret is a sentinel searched for in every error.
    static let accessKey = "FAKEACCESSKEYFORTESTS"
    static let secretKey = "sentinel-secret-0123456789-never-print-me"
    static let environment = [
        "TP_TEST_ACCESS": accessKey, "TP_TEST_SECRET": secretKey, "AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey,
    ]
    static let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// A real chunk file: FLAC written by the cache's own writer.
    static func flacFile() throws -> (url: URL, bytes: [UInt8]) {
        let url = TemporaryFolder.path("tourpack-object", suffix: ".flac")
        let samples = (0..<24_000).map { Int16(8000 * sin(Double($0) * 2 * .pi * 440 / 24_000)) }
        try FLACFile.write(PCMAudio(samples: samples, sampleRate: 24_000), to: url)
        return (url, Array(try Data(contentsOf: url)))
    }

    @Test func aFLACChunkGoesRoundTheStoreAndASecondPutIsSuccess() async throws {
        try await MotoTestServer.with { moto in
            let store = try await moto.store()
            let (file, bytes) = try Self.flacFile()
            defer { try? FileManager.default.removeItem(at: file) }
            let key = String(repeating: "ab", count: 32) + ".flac"

            #expect(try await store.put(key, file: file) == .stored)
            #expect(try await store.get(key) == bytes)
            let info = try #require(try await store.head(key))
            #expect(info.bytes == bytes.count)
            #expect(info.sha256 == ObjectStore.sha256Hex(bytes))

            // Another worker's put of the same chunk: the server answers 412, which is success.
            #expect(try await store.put(key, bytes: Array(bytes.reversed())) == .alreadyStored)
            #expect(try await store.get(key) == bytes, "the first object stays")

            let copy = file.appendingPathExtension("copy")
            defer { try? FileManager.default.removeItem(at: copy) }
            #expect(try await store.get(key, to: copy))
            #expect(Array(try Data(contentsOf: copy)) == bytes)
            #expect(try FLACFile.read(copy).samples.count == 24_000)

            try await store.delete(key)
            #expect(try await store.head(key) == nil)
            try await store.delete(key)  // already gone: fine
        }
    }

    @Test func aDamagedOrMissingObjectIsAMiss() async throws {
        try await MotoTestServer.with { moto in
            let store = try await moto.store()
            let (file, bytes) = try Self.flacFile()
            defer { try? FileManager.default.removeItem(at: file) }
            #expect(try await store.get("no-such-chunk.flac") == nil)
            #expect(try await store.head("no-such-chunk.flac") == nil)

            // Damage: a plain, unconditional PUT of other bytes under the same
            // key, keeping the recorded SHA-256 of the original.
            try await store.put("damaged.flac", bytes: bytes)
            var other = bytes
            other[other.count / 2] ^= 0xFF
            let sha = ObjectStore.sha256Hex(bytes)
            let overwrite = try await store.exchange(
                .put, "damaged.flac", body: other,
                headers: [(name: "Content-Type", value: "application/octet-stream"), (name: "x-amz-meta-sha256", value: sha)],
                operation: "PUT")
            #expect(overwrite.status == 200)
            #expect(try await store.get("damaged.flac") == nil)
            #expect(try await store.fetch("damaged.flac") == .damaged)
            #expect(try await store.fetch("no-such-chunk.flac") == .missing)
            #expect(try await store.fetch("damaged.flac") != .found(other))
            let target = file.appendingPathExtension("out")
            #expect(try await store.get("damaged.flac", to: target) == false)
            #expect(!FileManager.default.fileExists(atPath: target.path))

            // An object someone wrote without the metadata cannot be checked: a miss too.
            let bare = try await store.exchange(
                .put, "bare.flac", body: bytes, headers: [(name: "Content-Type", value: "application/octet-stream")], operation: "PUT")
            #expect(bare.status == 200)
            #expect(try await store.get("bare.flac") == nil)
        }
    }

    /// moto checks SigV4 signatures once `INITIAL_NO_AUTH_ACTION_COUNT`
    /// requests have passed unchecked. boto3 (moto's own dependency) spends
    /// them making an IAM user with a key pair and the bucket; then every
    /// request libcurl signs for the store is verified the way botocore
    /// signs, and a wrong secret is refused.
    static let bootstrap = """
        import boto3, json, sys
        kw = dict(endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        iam = boto3.client("iam", **kw)
        iam.create_user(UserName="tourpack")
        iam.put_user_policy(UserName="tourpack", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="tourpack")["AccessKey"]
        boto3.client("s3", **kw).create_bucket(Bucket=sys.argv[2])
        print(key["AccessKeyId"], key["SecretAccessKey"])
        """

    @Test func aServerThatChecksSignaturesAcceptsTheStoresRequests() async throws {
        try await MotoTestServer.with(environment: ["INITIAL_NO_AUTH_ACTION_COUNT": "4"]) { moto in
            let made = try Tool.run("python3", ["-c", Self.bootstrap, moto.endpoint, "verified"])
            let keys = made.stdout.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            guard made.status == 0, keys.count == 2 else { throw TestFailure("bootstrap failed: \(made.stderr)") }
            let settings = ObjectStoreSettings(endpoint: moto.endpoint, bucket: "verified", prefix: "synthesis/")
            let store = try ObjectStore(settings: settings, environment: ["AWS_ACCESS_KEY_ID": keys[0], "AWS_SECRET_ACCESS_KEY": keys[1]])
            let (file, bytes) = try Self.flacFile()
            defer { try? FileManager.default.removeItem(at: file) }
            #expect(try await store.put("ab/chunk.flac", file: file) == .stored)
            #expect(try await store.put("ab/chunk.flac", bytes: bytes) == .alreadyStored)
            #expect(try await store.head("ab/chunk.flac")?.bytes == bytes.count)
            #expect(try await store.get("ab/chunk.flac") == bytes)
            try await store.delete("ab/chunk.flac")
            #expect(try await store.get("ab/chunk.flac") == nil)

            let wrongSecret = keys[1] + "x"
            let forged = try ObjectStore(
                settings: settings, environment: ["AWS_ACCESS_KEY_ID": keys[0], "AWS_SECRET_ACCESS_KEY": wrongSecret])
            do {
                _ = try await forged.get("ab/chunk.flac")
                Issue.record("a request signed with the wrong secret was accepted")
            } catch {
                #expect("\(error)".contains("HTTP 403: SignatureDoesNotMatch"), "\(error)")
                #expect(!"\(error)".contains(wrongSecret) && !"\(error)".contains(keys[0]), "\(error)")
            }
        }
    }

    @Test func theKeysAppearInNoError() async throws {
        var errors: [String] = []
        try await MotoTestServer.with { moto in
            // A bucket that does not exist: every write fails with S3's own error.
            let settings = ObjectStoreSettings(endpoint: moto.endpoint, bucket: "no-such-bucket", prefix: "synthesis/")
            let store = try ObjectStore(settings: settings, environment: Self.environment)
            do {
                try await store.put("x.flac", bytes: [1, 2, 3])
                Issue.record("a put into a missing bucket succeeded")
            } catch { errors.append("\(error)") }
        }
        // Nothing listening.
        let closed = try PostgresTestServer.freePort()
        let gone = try ObjectStore(
            settings: ObjectStoreSettings(endpoint: "http://127.0.0.1:\(closed)", bucket: "bucket"), environment: Self.environment)
        do {
            _ = try await gone.get("x.flac")
            Issue.record("a get from a closed port succeeded")
        } catch { errors.append("\(error)") }
        // A server that echoes the signed request (and so the access key) in its error.
        let echo = try CaptureServer { head in (403, "<Error><Code>AccessDenied</Code><Message>\(head) \(Self.secretKey)</Message></Error>")
        }
        defer { echo.stop() }
        let echoed = try ObjectStore(
            settings: ObjectStoreSettings(endpoint: "http://127.0.0.1:\(echo.port)", bucket: "bucket"), environment: Self.environment)
        do {
            try await echoed.put("x.flac", bytes: [1])
            Issue.record("a 403 was taken for success")
        } catch { errors.append("\(error)") }
        #expect(echo.received.first?.contains(Self.accessKey) == true, "the access key did travel, in the Authorization header")
        // Unset variables name the variable only.
        for environment in [["TP_TEST_SECRET": Self.secretKey], ["TP_TEST_ACCESS": Self.accessKey]] {
            let settings = ObjectStoreSettings(
                endpoint: "http://127.0.0.1:9", bucket: "bucket", accessKeyEnv: "TP_TEST_ACCESS", secretKeyEnv: "TP_TEST_SECRET")
            do {
                _ = try ObjectStore(settings: settings, environment: environment)
                Issue.record("a store was made without its keys")
            } catch { errors.append("\(error)") }
        }
        #expect(errors.count == 5)
        #expect(errors.contains { $0.contains("HTTP 404") && $0.contains("NoSuchBucket") }, "\(errors)")
        #expect(errors.contains { $0.contains("HTTP 403: AccessDenied") }, "\(errors)")
        #expect(errors.contains { $0.contains("$TP_TEST_ACCESS is not set") }, "\(errors)")
        for error in errors {
            #expect(!error.contains(Self.secretKey), "\(error)")
            #expect(!error.contains(Self.accessKey), "\(error)")
        }
    }
}
