// swift-tools-version: 6.0
// An app's package outside tourpack's: it depends on tourpack by path and
// imports only TourpackClient, as the touring app does (run.sh drives it).
import PackageDescription

let package = Package(
    name: "OutsideApp",
    platforms: [.macOS(.v14)],
    dependencies: [.package(name: "tourpack", path: "../..")],
    targets: [
        .executableTarget(name: "OutsideApp", dependencies: [.product(name: "TourpackClient", package: "tourpack")])
    ]
)
