import Foundation
import TourpackCore

/// The files of a sharded cache folder (`<folder>/<ab>/<name>`, as the
/// synthesis and tile caches keep them) that no index entry names: a crash
/// between a file's rename and its insert, or a `cache clear` beside another
/// root's build. One sweep serves both caches.
enum OrphanSweep {
    /// Removes the files whose key (the name, less `suffix`) is not in
    /// `known` and that are older than `graceSeconds`, so a file another job
    /// has just written and is about to index is left alone (0: any age).
    static func run(folder: URL, known: Set<String>, suffix: String = "", graceSeconds: Double) -> (files: Int, bytes: Int64) {
        let fm = FileManager.default
        let cutoff = Date().addingTimeInterval(-graceSeconds)
        var removed = (files: 0, bytes: Int64(0))
        for shard in (try? fm.contentsOfDirectory(atPath: folder.path)) ?? [] where shard.count == 2 {
            let shardURL = folder.appendingPathComponent(shard, isDirectory: true)
            for name in (try? fm.contentsOfDirectory(atPath: shardURL.path)) ?? [] {
                let key = !suffix.isEmpty && name.hasSuffix(suffix) ? String(name.dropLast(suffix.count)) : name
                let url = shardURL.appendingPathComponent(name, isDirectory: false)
                guard !known.contains(key), let attributes = try? fm.attributesOfItem(atPath: url.path),
                    let modified = attributes[.modificationDate] as? Date, graceSeconds == 0 || modified < cutoff
                else { continue }
                if (try? AtomicFile.remove(url)) == true {
                    removed.files += 1
                    removed.bytes += (attributes[.size] as? NSNumber)?.int64Value ?? 0
                }
            }
        }
        return removed
    }
}
