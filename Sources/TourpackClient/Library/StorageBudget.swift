package import Foundation
package import TourpackPackage

/// Which packages go when the packages' budget on disk is passed: the
/// least recently accessed first (`markAccessed`; when it was installed,
/// when never accessed), never a protected one (pinned, playing, downloading). Each
/// file counts once however many packages name it, and a package frees
/// only the files no package staying names.
package struct StorageBudget: Sendable {
    package var maxBytes: Int64
    /// Tour IDs (lowercase) whose packages never go.
    package var protected: Set<String>

    package init(maxBytes: Int64, protected: Set<String>) {
        self.maxBytes = maxBytes
        self.protected = protected
    }

    /// The packages to remove so that `installed` plus `adding` bytes fit,
    /// in order; nil when the unprotected ones cannot free enough. The
    /// packages of `replacing` (the tour being downloaded) are left out of
    /// the count: the new package takes their place.
    package func evictions(
        from installed: [PackageOnDisk], adding: Int64 = 0, replacing tourId: String? = nil, accessed: [String: Date]
    ) -> [PackageOnDisk]? {
        // Files counted as often as packages name them bound what the
        // packages take from above: within the budget, nothing goes, and no
        // file is looked up (a download under a large budget pays no more
        // for a hundred packages than for one).
        let bound = installed.reduce(Int64(0)) { sum, package in
            package.files.reduce(sum + Int64(package.manifestBytes.count)) { $0 + $1.sizeBytes }
        }
        if adding <= maxBytes, bound <= maxBytes - adding { return [] }
        let kept = installed.filter { $0.manifest.tourId != tourId }
        let need = Self.bytes(of: kept) + adding - maxBytes
        guard need > 0 else { return [] }
        let candidates = kept.filter { !protected.contains($0.manifest.tourId) }.sorted {
            let a = accessed[$0.manifest.tourId] ?? $0.installedAt ?? $0.manifest.createdAt
            let b = accessed[$1.manifest.tourId] ?? $1.installedAt ?? $1.manifest.createdAt
            return a != b ? a < b : $0.packageId < $1.packageId
        }
        // How many kept packages name each file: a file is freed when the last one goes.
        var names: [String: Int] = [:]
        for file in kept.flatMap(\.files) { names[file.path, default: 0] += 1 }
        var evict: [PackageOnDisk] = []
        var freed: Int64 = 0
        for package in candidates where freed < need {
            evict.append(package)
            freed += Int64(package.manifestBytes.count)
            for file in package.files {
                names[file.path, default: 1] -= 1
                if names[file.path] == 0 { freed += file.sizeBytes }
            }
        }
        return freed >= need ? evict : nil
    }

    /// What `packages` take: their package.json files, and each file they name once.
    package static func bytes(of packages: [PackageOnDisk]) -> Int64 {
        var sizes: [String: Int64] = [:]
        for file in packages.flatMap(\.files) { sizes[file.path] = file.sizeBytes }
        return packages.reduce(Int64(0)) { $0 + Int64($1.manifestBytes.count) } + sizes.values.reduce(0, +)
    }
}
