// The package's own types that the library's API speaks in (`AudioFormat`,
// `AudioQuality`) come with it, so an app needs `import TourpackClient` alone.
@_exported public import TourpackPackage
