/// tourpack's pipeline, as a namespace for what belongs to the whole of it.
///
/// The map of the flow is the doc comment on `Builder` (and the catalog's
/// landing page); the targets and what each holds are in Package.swift.
package enum TourpackPipeline {
    /// The version `tourpack --version` prints.
    package static let version = "0.1.0"
}
