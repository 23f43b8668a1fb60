import Foundation
package import TourpackCore
package import TourpackPlan

extension OutputTree {
    /// Refuses (exit 2) a tree a build of `plan` in `formats` with `voice` could
    /// write through: a symlinked or non-folder `AudioCache`, `OfflineTours`,
    /// tour, package or `captions` folder, or a symlink at a file the build will replace.
    /// Every problem is listed in one error. Reads only; creates nothing.
    package static func check(
        _ layout: Layout, plan: BuildPlan, formats: [AudioFormat], bitrates: [AudioFormat: Int] = [:], voice: VoicePreset
    ) throws {
        var problems: [String] = []
        for top in [Layout.audioCacheFolder, Layout.offlineToursFolder] {
            let folder = layout.root.appendingPathComponent(top, isDirectory: true)
            if let problem = folderProblem(folder) {
                problems.append(problem)
                continue
            }
            // Every tour or package folder, planned or not: leftovers are
            // swept and superseded packages removed in each of them.
            for (name, found) in entries(of: folder).sorted(by: { $0.key < $1.key }) where found == .symlink {
                problems.append(describe(folder.appendingPathComponent(name), as: .symlink, wanted: "a folder"))
            }
        }
        // The files a build replaces, by folder and name: each folder is
        // listed once (`OutputTree.entries`), not each file looked at alone.
        var folders: [URL: [String]] = [:]
        for tourPlan in plan.tours {
            let tourID = tourPlan.tour.id
            let audio = layout.audioFolder(tourID: tourID).url
            folders[audio, default: []] += tourPlan.items.flatMap { item in
                formats.map { Layout.audioFileName(poiID: item.poiID, phase: item.phase, format: $0) }
            }
            for format in formats {
                let packageID = PackageID.make(tourID: tourID, voice: voice, format: format, bitrateKbps: bitrates[format])
                folders[layout.packageFolder(packageID: packageID).url, default: []] += [Layout.manifestFileName, Layout.tilePackFileName]
                // The caption files, in a folder of the package's own.
                folders[layout.captionsFolder(packageID: packageID).url, default: []] += tourPlan.items.map { item in
                    Layout.captionsFileName(poiID: item.poiID, phase: item.phase)
                }
            }
        }
        for (folder, names) in folders.sorted(by: { $0.key.path < $1.key.path }) {
            if let problem = folderProblem(folder) {
                if !problems.contains(problem) { problems.append(problem) }
                continue
            }
            let entries = entries(of: folder)
            for name in names {
                let found = entries[name] ?? .absent
                if found == .symlink || found == .folder {
                    problems.append(describe(folder.appendingPathComponent(name), as: found, wanted: "a file"))
                }
            }
        }
        guard !problems.isEmpty else { return }
        throw TourpackError.invalidInput(
            "the output tree is unsafe to write: \(problems.joined(separator: "; ")). "
                + "AudioCache, OfflineTours and their tour, package and captions folders must be real folders inside the output root "
                + "(or absent), and the files a build replaces must not be symlinks; nothing was requested or written")
    }
}
