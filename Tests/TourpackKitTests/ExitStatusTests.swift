import Testing
import TourpackCore
import TourpackKit

/// The exit codes have one home: every kind of failure exits with a code
/// the legend explains, and the legend is the line `tourpack --help` prints.
@Suite struct ExitStatusTests {
    @Test func everyKindOfFailureExitsWithACodeTheLegendExplains() {
        let explained = Set(ExitStatus.meanings.map(\.code))
        for kind in TourpackError.Kind.allCases {
            #expect(explained.contains(kind.exitCode), "\(kind) exits \(kind.exitCode), which the legend does not explain")
        }
        #expect(explained.count == ExitStatus.meanings.count, "a code explained twice")
    }

    @Test func theLegendReadsAsTheHelpHasAlwaysSaid() {
        #expect(
            ExitStatus.legend
                == "Exit codes: 0 ok · 1 build or validation failure · 2 bad input, config or usage · 3 a budget refused the work · 130 cancelled."
        )
    }
}
