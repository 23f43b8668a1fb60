// Every layer above Core speaks in the shipped package's types (layout,
// package.json, the catalogue, atomic files, errors), which live beneath it
// in `TourpackPackage` so the app's library can use them without the
// builder. Re-exported, as swift-nio's `NIO` re-exports `NIOCore`, so the
// layers keep importing Core alone.
@_exported public import TourpackPackage
