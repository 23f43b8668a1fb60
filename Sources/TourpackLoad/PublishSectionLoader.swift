import Foundation
import TourpackCore
import Yams

/// `publish:` in a pipeline: where `tourpack publish` puts the site.
///
/// ```yaml
/// publish:
///   target: {folder: ../build/site}          # or:
///   # target: {s3: {endpoint: https://s3.eu-central-1.amazonaws.com, bucket: tours-cdn, prefix: v1/,
///   #               region: eu-central-1, accessKeyEnv: AWS_ACCESS_KEY_ID, secretKeyEnv: AWS_SECRET_ACCESS_KEY}}
///   signingKeyEnv: TOURPACK_SIGNING_KEY     # optional; without it the catalogue is marked unsigned
///   keepGenerations: 10
///   graceDays: 7
///   catalogTTLDays: 7                        # the catalogue's expiresAt: publish (or --refresh) + this
/// ```
///
/// As in `state:`, keys are never in the file, only the names of the
/// variables that hold them.
extension PipelineLoader {
    static let publishKeys = ["target", "signingKeyEnv", "keepGenerations", "graceDays", "catalogTTLDays"]

    /// The section's settings, nil when it is absent or its target is unusable (with the errors in `reader`).
    static func readPublish(_ node: Node?, base: URL, reader: inout YAMLReader) -> PublishSettings? {
        guard let node, let map = reader.mapping(node, at: "publish", allowed: publishKeys) else { return nil }
        var target: PublishSettings.Target?
        if let node = map["target"], let targetMap = reader.mapping(node, at: "publish.target", allowed: ["folder", "s3"]) {
            switch (targetMap["folder"], targetMap["s3"]) {
            case (let folder?, nil):
                target = reader.string(folder, at: "publish.target.folder").map { .folder(resolve($0, against: base)) }
            case (nil, let s3?):
                if let s3Map = reader.mapping(s3, at: "publish.target.s3", allowed: objectKeys),
                    let settings = readObjects(s3Map, at: "publish.target.s3", reader: &reader)
                {
                    target = .s3(settings)
                }
            case (nil, nil):
                reader.error("publish.target", "name one target: {folder: PATH} or {s3: {endpoint: …, bucket: …}}")
            case (.some, .some):
                reader.error("publish.target", "name one target, folder or s3, not both")
            }
        } else if map["target"] == nil {
            reader.error("publish.target", "missing required field ({folder: PATH} or {s3: {endpoint: …, bucket: …}})")
        }
        var settings = PublishSettings(target: target ?? .folder(base))
        if let name = reader.string(map["signingKeyEnv"], at: "publish.signingKeyEnv") {
            if isEnvironmentName(name) {
                settings.signingKeyEnv = name
            } else {
                reader.error("publish.signingKeyEnv", notAnEnvironmentName)
            }
        }
        settings.keepGenerations =
            reader.integer(map["keepGenerations"], at: "publish.keepGenerations", range: 1...10_000) ?? settings.keepGenerations
        settings.graceDays = reader.integer(map["graceDays"], at: "publish.graceDays", range: 0...3650) ?? settings.graceDays
        settings.catalogTTLDays =
            reader.integer(map["catalogTTLDays"], at: "publish.catalogTTLDays", range: 1...366) ?? settings.catalogTTLDays
        return target == nil ? nil : settings
    }
}
