import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackState

/// Issue 50, part 4: each narration's plan is kept between builds
/// (`KeptPlans`), keyed by everything it follows from, so a rebuild cuts
/// only the narrations whose text, voice, lexicons or chunking changed.
@Suite struct KeptPlanTests {
    static func lexicon(_ alias: String) -> String {
        LexiconTests.header + "<lexeme><grapheme>Zermatt</grapheme><alias>\(alias)</alias></lexeme></lexicon>"
    }

    /// Three narrations, of which only the first names the lexicon's grapheme.
    static func tours(_ config: PipelineConfig, fixture: ConfigFixture) throws -> [Tour] {
        let resources = Bundle.module.url(forResource: "Resources", withExtension: nil)!
        try FileManager.default.copyItem(
            at: resources.appendingPathComponent("good-tour.json"), to: fixture.root.appendingPathComponent("tours/good.json"))
        var tour = try #require(try TourLoader().loadAll(globs: config.tourGlobs).first)
        let sentences = String(repeating: "The road climbs past the old mill, and the valley opens below. ", count: 6)
        tour.pois[0].narrations[.approaching] = Narration(text: "Ahead lies Zermatt. " + sentences)
        tour.pois[0].narrations[.detailed] = Narration(text: "The church was built in 1620. " + sentences)
        tour.pois[1].narrations[.guidedTour] = Narration(text: "Look to the left. " + sentences)
        return [tour]
    }

    static func items(_ plan: BuildPlan) -> [PlanItem] { plan.tours.flatMap(\.items) }

    /// What a plan says of each item, whatever its origin.
    static func contents(_ plan: BuildPlan) -> [[String]] {
        items(plan).map { item in
            item.chunks.map(\.text) + item.keys.map(\.hex) + ["\(item.characters) \(item.spokenCharacters) \(item.counts?.heard ?? -1)"]
        }
    }

    @Test("A lexicon edit plans again just the narration it rewrites, whose chunks change; the others come from the kept plans")
    func aLexiconEditPlansAgainOnlyWhatItRewrites() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        try FileManager.default.createDirectory(at: fixture.root.appendingPathComponent("lexicons"), withIntermediateDirectories: true)
        try fixture.write("lexicons/l.pls", Self.lexicon("Tsermatt"))
        let yaml = PipelineConfigTests.minimal + "lexicons: [../lexicons/l.pls]\n"
        let config = try fixture.load(yaml)
        let tours = try Self.tours(config, fixture: fixture)
        let file = fixture.root.appendingPathComponent("state/plans.kept")
        let now = Date(timeIntervalSince1970: 1_800_000_000)

        let cold = try Planner(config: config).plan(tours)
        #expect(cold.narrationsPlanned == 3)
        #expect(try KeptPlans.keep(cold, in: file, now: now))
        let kept = KeptPlans.load(file)
        #expect(kept.count == 6, "3 plans, each named by its narration as written too")

        let warm = try Planner(config: config, kept: kept).plan(tours)
        #expect(warm.narrationsPlanned == 0, "nothing changed: no narration is cut again")
        #expect(Self.items(warm).allSatisfy { $0.origin?.aliasDay != nil }, "or even rewritten")
        #expect(Self.contents(warm) == Self.contents(cold))
        #expect(warm.characters == cold.characters && warm.billableCharacters == cold.billableCharacters)
        #expect(warm.estimatedDurationSeconds == cold.estimatedDurationSeconds && warm.chunks == cold.chunks)
        #expect(try !KeptPlans.keep(warm, in: file, now: now), "a warm plan writes nothing")

        try fixture.write("lexicons/l.pls", Self.lexicon("Tsehr-matt"))
        let edited = try fixture.load(yaml)
        let replanned = try Planner(config: edited, kept: kept).plan(tours)
        #expect(replanned.narrationsPlanned == 1)
        let (before, after) = (Self.items(cold), Self.items(replanned))
        #expect(after[0].chunks.map(\.text).joined().contains("Tsehr-matt") && before[0].chunks.map(\.text).joined().contains("Tsermatt"))
        #expect(after[0].keys != before[0].keys, "its audio is made again")
        #expect(Array(Self.contents(replanned).dropFirst()) == Array(Self.contents(cold).dropFirst()))
        #expect(after[1].origin?.keptDay != nil && after[2].origin?.keptDay != nil, "the others are kept")
        // And it matches what a plan from scratch makes.
        #expect(Self.contents(replanned) == Self.contents(try Planner(config: edited).plan(tours)))
    }

    @Test("The text, the voice, the chunking settings and captions each plan again what they change")
    func everyInputIsInTheKey() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let config = try fixture.load(PipelineConfigTests.minimal)
        let tours = try Self.tours(config, fixture: fixture)
        let file = fixture.root.appendingPathComponent("state/plans.kept")
        try KeptPlans.keep(try Planner(config: config).plan(tours), in: file, now: Date())
        let kept = KeptPlans.load(file)
        func planned(_ config: PipelineConfig, _ tours: [Tour]) throws -> (count: Int, contents: [[String]]) {
            let plan = try Planner(config: config, kept: kept).plan(tours)
            return (plan.narrationsPlanned, Self.contents(plan))
        }
        #expect(try planned(config, tours).count == 0)

        var text = tours
        text[0].pois[0].narrations[.detailed] = Narration(text: "The church was rebuilt in 1621.")
        #expect(try planned(config, text).count == 1)

        var faster = config
        faster.voice.speakingRate = 1.5
        #expect(try planned(faster, tours).count == 3, "the keys hold the rate")
        var otherVoice = config
        otherVoice.voice.name = "en-US-Neural2-C"
        #expect(try planned(otherVoice, tours).count == 3)
        var rate = config
        rate.tts.sampleRateHz = 16_000
        #expect(try planned(rate, tours).count == 3)

        var headroom = config
        headroom.chunking.headroom = config.requestLimit.value - 120
        let cut = try planned(headroom, tours)
        #expect(cut.count == 3)
        #expect(cut.contents == Self.contents(try Planner(config: headroom).plan(tours)))
        #expect(cut.contents.map(\.count) != (try planned(config, tours)).contents.map(\.count), "a smaller limit cuts more chunks")

        var captionsOff = config
        captionsOff.audio.captions = .off
        #expect(try planned(captionsOff, tours).count == 3, "captions change the sentence marks' cost")
    }

    @Test("The file keeps every build's entries, drops one unused for 30 days, and counts as empty when it is damaged")
    func theFileMergesPrunesAndSurvivesDamage() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let config = try fixture.load(PipelineConfigTests.minimal)
        let tours = try Self.tours(config, fixture: fixture)
        let file = fixture.root.appendingPathComponent("state/plans.kept")
        let day = 86_400.0
        let start = Date(timeIntervalSince1970: 1_800_000_000)

        // Two builds sharing the state, each with one tour's narrations.
        var first = tours, second = tours
        first[0].pois.removeLast()
        second[0].pois.removeFirst()
        try KeptPlans.keep(try Planner(config: config).plan(first), in: file, now: start)
        try KeptPlans.keep(try Planner(config: config).plan(second), in: file, now: start)
        #expect(KeptPlans.load(file).count == 3)
        #expect(try Planner(config: config, kept: KeptPlans.load(file)).plan(tours).narrationsPlanned == 0)

        // Used again after two days: stamped anew, so it outlives the one left unused.
        let used = try Planner(config: config, kept: KeptPlans.load(file)).plan(first)
        #expect(try KeptPlans.keep(used, in: file, now: start.addingTimeInterval(2 * day)))
        let late = try Planner(config: config, kept: KeptPlans.load(file)).plan(first)
        var changed = first
        changed[0].pois[0].narrations[.approaching] = Narration(text: "A new sentence.")
        let withNew = try Planner(config: config, kept: KeptPlans.load(file)).plan(changed)
        #expect(withNew.narrationsPlanned == 1 && late.narrationsPlanned == 0)
        try KeptPlans.keep(withNew, in: file, now: start.addingTimeInterval(31 * day))
        let pruned = try Planner(config: config, kept: KeptPlans.load(file)).plan(tours)
        #expect(pruned.narrationsPlanned == 1, "the second build's entry, unused for 30 days, is gone")

        var damaged = try Data(contentsOf: file)
        damaged.removeLast(5)
        try damaged.write(to: file)
        #expect(KeptPlans.load(file).count == 0)
        try Data("not a plan".utf8).write(to: file)
        #expect(try Planner(config: config, kept: KeptPlans.load(file)).plan(tours).narrationsPlanned == 3)
    }
}
