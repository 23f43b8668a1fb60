import Foundation
import Testing

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackLoad
@testable import TourpackState

/// `state:` as a plain path (as always) or as a mapping naming the shared
/// object store, PostgreSQL and scratch; keys only as variable names.
@Suite struct StateSectionTests {
    static let minimal = "version: 1\ntours: [../tours/*.json]\n"

    @Test func aPlainPathAndNoStateKeepTheirMeaning() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let plain = try fixture.load(Self.minimal + "state: ../somewhere\n")
        #expect(plain.state.path == fixture.root.appendingPathComponent("somewhere").standardizedFileURL.path)
        #expect(plain.shared == SharedStateSettings())
        let none = try fixture.load(Self.minimal)
        #expect(none.state.path == fixture.root.appendingPathComponent("build/state").standardizedFileURL.path)
        #expect(none.shared == SharedStateSettings())
        #expect(!none.settledDescription(environment: [:]).contains("objects"))
    }

    @Test func theMappingNamesTheBucketAndTheVariables() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let config = try fixture.load(
            Self.minimal + """
                state:
                  postgres: postgresql://tourpack@db.internal:5432/tourpack
                  objects:
                    endpoint: https://s3.eu-central-1.amazonaws.com
                    bucket: tourpack-cache
                    prefix: synthesis/
                    region: eu-central-1
                    accessKeyEnv: MY_ACCESS
                    secretKeyEnv: MY_SECRET
                  scratch: /var/tmp/tourpack

                """)
        #expect(
            config.shared.objects
                == ObjectStoreSettings(
                    endpoint: "https://s3.eu-central-1.amazonaws.com", bucket: "tourpack-cache", prefix: "synthesis/",
                    region: "eu-central-1",
                    accessKeyEnv: "MY_ACCESS", secretKeyEnv: "MY_SECRET"))
        #expect(config.shared.postgres == "postgresql://tourpack@db.internal:5432/tourpack")
        #expect(config.shared.postgresPasswordEnv == "PGPASSWORD")
        #expect(config.shared.scratch?.path == "/var/tmp/tourpack")
        #expect(config.state.path == "/var/tmp/tourpack", "no path: the scratch folder holds the local state")

        let text = config.settledDescription(environment: ["MY_ACCESS": "FAKEACCESSSENTINEL", "MY_SECRET": "sentinel-secret-value"])
        #expect(text.contains("bucket tourpack-cache"))
        #expect(text.contains("$MY_ACCESS (set)") && text.contains("$MY_SECRET (set)"))
        #expect(text.contains("password from $PGPASSWORD (not set)"))
        #expect(!text.contains("FAKEACCESSSENTINEL") && !text.contains("sentinel-secret-value"))
        #expect(!text.contains("tourpack@"), "user info stays out of the printout")

        let withPath = try fixture.load(Self.minimal + "state:\n  path: ../local\n  scratch: /var/tmp/tp\n")
        #expect(withPath.state.path == fixture.root.appendingPathComponent("local").standardizedFileURL.path)
        let defaults = try fixture.load(Self.minimal + "state:\n  objects: {endpoint: 'http://127.0.0.1:9000', bucket: b12}\n")
        #expect(
            defaults.shared.objects
                == ObjectStoreSettings(
                    endpoint: "http://127.0.0.1:9000", bucket: "b12", prefix: "", region: "us-east-1",
                    accessKeyEnv: "AWS_ACCESS_KEY_ID", secretKeyEnv: "AWS_SECRET_ACCESS_KEY"))
    }

    @Test func aKeyWhereANameBelongsIsRefusedAndNotQuoted() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
        let errors = fixture.errors(
            Self.minimal + """
                state:
                  postgres: 'postgresql://tourpack:hunter2-sentinel@db:5432/tourpack'
                  passwordEnv: 'hunter2-sentinel'
                  objects:
                    endpoint: 'https://AKIDEXAMPLE:\(secret)@s3.example.com'
                    bucket: Not_A_Bucket
                    prefix: /bad prefix
                    accessKeyEnv: AKIDEXAMPLE-1
                    secretKeyEnv: '\(secret)'
                  cache: nope

                """)
        #expect(
            errors.contains(
                "pipelines/p.yaml: state.cache: unknown key; expected one of \(PipelineLoader.stateKeys.joined(separator: ", "))"),
            "\(errors)")
        #expect(errors.contains("pipelines/p.yaml: state.objects.secretKeyEnv: \(PipelineLoader.notAnEnvironmentName)"), "\(errors)")
        #expect(errors.contains("pipelines/p.yaml: state.objects.accessKeyEnv: \(PipelineLoader.notAnEnvironmentName)"), "\(errors)")
        #expect(errors.contains("pipelines/p.yaml: state.passwordEnv: \(PipelineLoader.notAnEnvironmentName)"), "\(errors)")
        #expect(
            errors.contains { $0.hasPrefix("pipelines/p.yaml: state.objects.endpoint: credentials in the endpoint URL are not allowed") },
            "\(errors)")
        #expect(errors.contains { $0.hasPrefix("pipelines/p.yaml: state.postgres: a password in the URL is not allowed") }, "\(errors)")
        #expect(errors.contains { $0.hasPrefix("pipelines/p.yaml: state.objects.bucket:") }, "\(errors)")
        for error in errors {
            #expect(!error.contains(secret) && !error.contains("hunter2-sentinel") && !error.contains("AKIDEXAMPLE"), "\(error)")
        }

        let sslmode = fixture.errors(Self.minimal + "state:\n  postgres: 'postgresql://tp@db/x?sslmode=sometimes'\n")
        #expect(sslmode == ["pipelines/p.yaml: state.postgres: \(PostgresURL.sslmodeProblem("sometimes"))"], "\(sslmode)")
        #expect(PostgresURL.sslmodeProblem("sometimes").hasPrefix("sslmode 'sometimes' is not one of disable, prefer, require"))

        let missing = fixture.errors(Self.minimal + "state:\n  objects: {prefix: synthesis/}\n")
        #expect(missing.contains { $0.hasPrefix("pipelines/p.yaml: state.objects.endpoint: missing required field") }, "\(missing)")
        #expect(missing.contains("pipelines/p.yaml: state.objects.bucket: missing required field"), "\(missing)")
    }
}
