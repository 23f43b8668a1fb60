// The library product is the whole pipeline: its stages are targets of
// their own (Package.swift), and whoever imports TourpackKit speaks in
// their types, as in its own.
@_exported public import TourpackLoad
@_exported public import TourpackPlan
@_exported public import TourpackSpeech
@_exported public import TourpackValidate
