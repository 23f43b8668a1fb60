import Foundation
import Testing
import TourpackCore
import TourpackTesting
import Yams

@testable import TourpackKit
@testable import TourpackLoad

/// `deploy/` parsed as Kubernetes would read it: the Indexed Job's shape
/// (N completions, N in parallel, N shards), its failure policy (exit 2 and
/// exit 3 are never retried), its keys from Secrets, its output on a
/// ReadWriteMany claim, and a pipeline in the ConfigMap that tourpack loads.
@Suite struct DeployManifestTests {
    static let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy")

    static func document(_ name: String) throws -> [String: Any] {
        let text = try String(contentsOf: deploy.appendingPathComponent(name), encoding: .utf8)
        return try #require(try Yams.load(yaml: text) as? [String: Any], "\(name) is not one YAML mapping")
    }

    @Test func theJobIsIndexedWithOneShardPerIndex() throws {
        let job = try Self.document("job.yaml")
        #expect(job["apiVersion"] as? String == "batch/v1")
        #expect(job["kind"] as? String == "Job")
        let spec = try #require(job["spec"] as? [String: Any])
        #expect(spec["completionMode"] as? String == "Indexed")
        let completions = try #require(spec["completions"] as? Int)
        #expect(completions == 4)
        #expect(spec["parallelism"] as? Int == completions)
        #expect((spec["backoffLimitPerIndex"] as? Int).map { $0 >= 1 } == true)
        #expect(spec["backoffLimit"] == nil, "backoffLimit counts failures across indexes; the limit is per index")

        let pod = try #require((spec["template"] as? [String: Any])?["spec"] as? [String: Any])
        #expect(pod["restartPolicy"] as? String == "Never", "podFailurePolicy needs restartPolicy Never")
        let containers = try #require(pod["containers"] as? [[String: Any]])
        #expect(containers.count == 1)
        let container = containers[0]
        let command = try #require(container["command"] as? [String])
        #expect(command.prefix(3) == ["tourpack", "build", "/config/pipeline.yaml"])
        let shards = try #require(command.firstIndex(of: "--shards").map { command[$0 + 1] })
        #expect(Int(shards) == completions, "--shards must equal completions")
        #expect(!command.contains("--shard"), "the index comes from JOB_COMPLETION_INDEX")

        // exit 2 (bad input) and exit 3 (budget) fail their index at once.
        let rules = try #require((spec["podFailurePolicy"] as? [String: Any])?["rules"] as? [[String: Any]])
        let failIndex = rules.filter { $0["action"] as? String == "FailIndex" }
        let codes = failIndex.compactMap { $0["onExitCodes"] as? [String: Any] }
        #expect(
            codes.contains { rule in
                rule["operator"] as? String == "In" && Set(rule["values"] as? [Int] ?? []) == [2, 3]
                    && rule["containerName"] as? String == container["name"] as? String
            }, "\(rules)")
        #expect(!rules.contains { ($0["action"] as? String) == "Ignore" && $0["onExitCodes"] != nil }, "no exit code may be ignored")

        // Keys only from Secrets, under the names the pipeline gives.
        let env = try #require(container["env"] as? [[String: Any]])
        var fromSecrets: Set<String> = []
        for variable in env {
            let name = try #require(variable["name"] as? String)
            #expect(variable["value"] == nil, "\(name) has a literal value; keys come from Secrets")
            if ((variable["valueFrom"] as? [String: Any])?["secretKeyRef"] as? [String: Any])?["name"] as? String == "tourpack-keys" {
                fromSecrets.insert(name)
            }
        }
        #expect(fromSecrets == ["TTS_API_KEY", "PGPASSWORD", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])

        // The pipeline from the ConfigMap, the output on the shared claim.
        let volumes = try #require(pod["volumes"] as? [[String: Any]])
        let mounts = try #require(container["volumeMounts"] as? [[String: Any]])
        func volume(mountedAt path: String) -> [String: Any]? {
            guard let name = mounts.first(where: { $0["mountPath"] as? String == path })?["name"] as? String else { return nil }
            return volumes.first { $0["name"] as? String == name }
        }
        #expect((volume(mountedAt: "/config")?["configMap"] as? [String: Any])?["name"] as? String == "tourpack-pipeline")
        #expect((volume(mountedAt: "/output")?["persistentVolumeClaim"] as? [String: Any])?["claimName"] as? String == "tourpack-output")

        // Staging and journals outlive the pod: a folder per index on the
        // shared claim, named by the index the pod's environment holds, so
        // the index's next pod replays a killed publish's journal.
        let scratch = try #require(mounts.first { $0["mountPath"] as? String == "/scratch" }, "no /scratch mount")
        #expect((volume(mountedAt: "/scratch")?["persistentVolumeClaim"] as? [String: Any])?["claimName"] as? String == "tourpack-output")
        let subPath = try #require(scratch["subPathExpr"] as? String)
        #expect(subPath.contains("$(JOB_COMPLETION_INDEX)"))
        let index = try #require(env.first { $0["name"] as? String == "JOB_COMPLETION_INDEX" })
        #expect(
            ((index["valueFrom"] as? [String: Any])?["fieldRef"] as? [String: Any])?["fieldPath"] as? String
                == "metadata.annotations['batch.kubernetes.io/job-completion-index']")
        // The worker's own files stay on local disk.
        #expect(volume(mountedAt: "/var/tmp/tourpack")?["emptyDir"] != nil)
    }

    @Test func theOutputClaimIsReadWriteMany() throws {
        let claim = try Self.document("pvc.yaml")
        #expect(claim["kind"] as? String == "PersistentVolumeClaim")
        #expect((claim["metadata"] as? [String: Any])?["name"] as? String == "tourpack-output")
        #expect((claim["spec"] as? [String: Any])?["accessModes"] as? [String] == ["ReadWriteMany"])
    }

    @Test func theExampleSecretHoldsPlaceholdersOnly() throws {
        let secret = try Self.document("secrets.example.yaml")
        #expect(secret["kind"] as? String == "Secret")
        #expect((secret["metadata"] as? [String: Any])?["name"] as? String == "tourpack-keys")
        let values = try #require(secret["stringData"] as? [String: String])
        #expect(Set(values.keys) == ["tts-api-key", "pgpassword", "aws-access-key-id", "aws-secret-access-key"])
        for (name, value) in values { #expect(value.hasPrefix("REPLACE-WITH-"), "\(name) looks like a real value") }
    }

    /// The ConfigMap's pipeline is one tourpack accepts, with the shared state it names.
    @Test func theConfigMapHoldsAPipelineTourpackLoads() throws {
        let map = try Self.document("configmap.yaml")
        #expect((map["metadata"] as? [String: Any])?["name"] as? String == "tourpack-pipeline")
        let text = try #require((map["data"] as? [String: String])?["pipeline.yaml"])
        let folder = try TemporaryFolder.make("tourpack-deploy")
        defer { TemporaryFolder.remove(folder) }
        let file = folder.appendingPathComponent("pipeline.yaml")
        try text.write(to: file, atomically: true, encoding: .utf8)
        let config = try PipelineLoader.load(file)
        #expect(config.tts.apiKeyEnv == "TTS_API_KEY")
        #expect(config.output.path == "/output/Documents")
        #expect(config.state.path == "/var/tmp/tourpack")
        #expect(config.shared.scratch?.path == "/scratch")
        #expect(config.shared.objects?.bucket == "tourpack-cache")
        #expect(config.shared.objects?.accessKeyEnv == "AWS_ACCESS_KEY_ID")
        #expect(config.shared.postgresPasswordEnv == "PGPASSWORD")
    }
}
