import TourpackTesting

/// Deterministic, varied tour prose for the long-narration benchmarks.
///
/// A 30-minute guided tour is about 27,000 characters of speech. Repeating
/// one sentence would make every chunk alike (and the synthesis cache, or a
/// clever codec, would have it easy); real narration has names, years,
/// distances, decimals and abbreviations that the chunker must not cut at
/// ("St.", "Dr.", "e.g.", "approx.", "J. R."). So each sentence is one of
/// several dozen templates, filled from lists of names, places and numbers by
/// a seeded generator, dealt like a shuffled deck so each template comes back
/// only after all the others: the same seed always gives the same text, and
/// no two POIs, nor two paragraphs of one POI, read alike.
struct NarrationProse {
    private var random: SeededGenerator
    /// Template indices still to deal before the next shuffle.
    private var deck: [Int] = []

    init(seed: UInt64) {
        random = SeededGenerator(seed: seed)
    }

    /// About `characters` characters (never fewer) of paragraphs about the
    /// POI `name`, ending at a sentence boundary.
    mutating func guidedTour(name: String, characters: Int) -> String {
        var text = "Welcome to \(name). Over the next half hour we will walk around it together, so find a comfortable pace."
        var sentencesInParagraph = 0
        while text.unicodeScalars.count < characters {
            let index = deal()
            sentencesInParagraph += 1
            // Paragraphs of four to seven sentences; the break is a space to
            // the chunker, but it keeps the JSON readable in an editor.
            let separator = sentencesInParagraph > 3 + pick(4) ? "\n\n" : " "
            if separator == "\n\n" { sentencesInParagraph = 0 }
            text += separator + sentence(Self.templates[index])
        }
        return text
    }

    /// One or two sentences: the short approaching or detailed phase.
    mutating func short(name: String, sentences: Int) -> String {
        var text = "You are approaching \(name)."
        for _ in 0..<sentences { text += " " + sentence(Self.templates[deal()]) }
        return text
    }

    /// One paragraph of `count` sentences, as a `detailed` or
    /// `guidedTour` narration is written: issue 50's realistic lengths are
    /// 4-9 sentences for `detailed` and 3-6 for `guidedTour`.
    mutating func paragraph(sentences count: Int) -> String {
        (0..<count).map { _ in sentence(Self.templates[deal()]) }.joined(separator: " ")
    }

    /// A number in `range`, from the same seeded generator.
    mutating func number(in range: ClosedRange<Int>) -> Int { range.lowerBound + pick(range.count) }

    /// The next template of the deck; a fresh shuffle (Fisher–Yates) when it is empty.
    private mutating func deal() -> Int {
        if deck.isEmpty {
            deck = Array(Self.templates.indices)
            for index in stride(from: deck.count - 1, to: 0, by: -1) { deck.swapAt(index, pick(index + 1)) }
        }
        return deck.removeLast()
    }

    /// `template` with every `{slot}` filled.
    private mutating func sentence(_ template: String) -> String {
        var result = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            result += rest[..<open]
            result += fill(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return result + rest
    }

    private mutating func fill(_ slot: String) -> String {
        switch slot {
        case "person": return Self.people[pick(Self.people.count)]
        case "surname": return Self.surnames[pick(Self.surnames.count)]
        case "place": return Self.places[pick(Self.places.count)]
        case "saint": return Self.saints[pick(Self.saints.count)]
        case "month": return Self.months[pick(Self.months.count)]
        case "day": return String(1 + pick(28))
        case "year": return String(1700 + pick(280))
        case "century": return ["twelfth", "fourteenth", "sixteenth", "seventeenth", "eighteenth", "nineteenth"][pick(6)]
        case "small": return String(2 + pick(18))
        case "number": return String(40 + pick(2_900))
        case "big": return grouped(1_200 + pick(480_000))
        case "decimal": return "\(1 + pick(24)).\(1 + pick(9))"
        case "minutes": return String(10 + 5 * pick(12))
        case "digit": return String(1 + pick(9))
        case "hour": return ["five", "six", "seven"][pick(3)]
        case "season": return ["spring", "early summer", "high summer", "autumn"][pick(4)]
        default: return slot
        }
    }

    private func grouped(_ value: Int) -> String {
        var digits = String(value)
        var index = digits.count - 3
        while index > 0 {
            digits.insert(",", at: digits.index(digits.startIndex, offsetBy: index))
            index -= 3
        }
        return digits
    }

    private mutating func pick(_ count: Int) -> Int { Int(random.next() % UInt64(count)) }

    static let people = [
        "Emperor Franz Joseph", "Empress Elisabeth", "Archduke Johann", "the engineer Franz Wallack", "Dr. Anna Huber",
        "Mr. Peter Gruber", "Mrs. Hedwig Moser", "Prof. Karl Weiss", "the painter J. M. W. Turner", "Queen Victoria",
        "the surveyor J. R. Bauer", "Father Thomas Egger", "the mountaineer Mary Paillon", "Capt. Ludwig Rainer",
    ]
    static let surnames = ["Huber", "Gruber", "Moser", "Weiss", "Egger", "Pichler", "Steiner", "Hofer", "Kofler", "Brunner", "Wallner"]
    static let places = [
        "St. Moritz", "Heiligenblut", "Zell am See", "the Inn valley", "Bormio", "Andermatt", "Mt. Blanc", "Lienz",
        "Innsbruck", "the Pasterze glacier", "Bolzano", "Chur", "St. Anton", "the Rhône glacier", "Salzburg",
    ]
    static let saints = ["Nicholas", "Florian", "Leonhard", "Anne", "Bartholomew", "Christopher", "Margaret", "Wolfgang"]
    static let months = ["Jan.", "Feb.", "March", "April", "May", "June", "July", "Aug.", "Sept.", "Oct.", "Nov.", "Dec."]

    /// Sentence templates; `{slot}` names what `fill` puts there.
    static let templates = [
        "In {year}, {person} stopped here on the way to {place}, and the inn below still keeps the guest book with that signature.",
        "The path ahead is {decimal} km long and climbs about {number} m, so allow roughly {minutes} minutes at an easy pace.",
        "Look to your left: the chapel of St. {saint} was built in {year} with stones carried up on foot from {place}.",
        "Local guides, e.g. the volunteers of the Alpine Club, have counted more than {number} ibex on these slopes since {year}.",
        "Many visitors ask why the road bends so sharply at kilometre {small}; the answer lies in the rock, a soft schist that slides after every thaw.",
        "Dr. {surname} of the university in Innsbruck measured the glacier every summer from {year} on, and the notes show a retreat of {decimal} km.",
        "If you have time, try the apricot dumplings at the {surname} hut, i.e. the small wooden house with the green shutters and the bench outside.",
        "On a typical July afternoon it is {small} degrees colder up here than in {place}, so keep a jacket within reach.",
        "During the war of {year}, soldiers dug tunnels into the ridge, and some of their entrances can still be seen from the viewpoint at {number} m.",
        "Approx. {big} vehicles cross the pass each year, most of them between June and October, when the snow has gone.",
        "Mr. and Mrs. {surname} opened the first guest house here in {year}; their great-grandchildren still run it today.",
        "Stop for a moment and listen... on a quiet morning in {season} you can hear the marmots whistle a warning to one another.",
        "The toll station ahead opened on {month} {day}, {year}, and the first driver paid {decimal} schillings to pass.",
        "Geologists date the limestone beneath your feet to about {small}0 million years ago, when this whole region lay under a warm, shallow sea.",
        "Notice the stone wall on the right, some {number} m long, which keeps the drifting snow from burying the road every winter.",
        "What would you have packed for a crossing in {year}, with no road, no hut, and no reliable map of the valley?",
        "Farmers still drive their cattle up to the high pastures in late May and bring them down again in Sept., a custom the locals call the Almabtrieb.",
        "The botanist Prof. {surname} listed {number} species of flowering plants within a {decimal} km radius of this very bend.",
        "From here to {place} is {small} km as the crow flies, but the winding road takes almost twice that distance.",
        "The old mule track, only 2.{digit} m wide in places, ran a little higher up the slope toward {place}, and its worn cobbles are still visible.",
        "“It is the most beautiful road in all the Alps,” wrote {person} in a letter of {year}, and few who stand here would disagree.",
        "The bells of St. {saint} ring at noon and at six, a habit kept since the {century} century, when they called the herders home.",
        "A small museum in {place} holds {big} objects from the valley, e.g. sledges, cowbells, tools and a reconstructed kitchen of {year}.",
        "Avalanche barriers like the ones above you cost about {decimal} million euros per kilometre and must be inspected every spring.",
        "Here the river drops {number} m in less than {small} km, which is why three sawmills once stood along this short stretch.",
        "The hotel you see across the valley had {small}0 rooms, electric light and a telegraph office when it opened in {year}.",
        "Walkers who set out early, i.e. before {hour} o'clock, often see chamois grazing on the scree below the north face.",
        "Legend has it that {person} lost a silver ring near this spring, and that it still brings luck to whoever finds it.",
        "The first bus service reached the summit in {year}; the journey from {place} took {small} hours, with a stop to cool the engine.",
        "Keep an eye on the sky to the west: thunderstorms build quickly here in summer, often by {small} o'clock in the afternoon.",
        "The border stone beside the path is dated {year} and marks a boundary that changed hands at least {small} times since then.",
        "Mt. Glockner's summit cross, at 3,798 m, was raised in {year} by a team led by Father {surname}, who carried the last section alone.",
        "Snow still lies here until mid-June in most years, and in {year} the road opened only on {month} {day}.",
        "The dairy below makes about {number} kg of mountain cheese a season, aged for at least {small} months in the cellar beneath the barn.",
        "Our next stop is {decimal} km further on, past the second hairpin and the small lake that reflects the glacier on calm days.",
        "Engineers blasted {big} cubic metres of rock for this section alone, working by hand and with black powder until {year}.",
        "Capt. {surname} mapped this valley in {year} at a scale of 1 to 25,000, and his map was used by walkers for almost a century.",
        "The larch trees around you turn gold in Oct., about {small} days after the first frost, and lose their needles before the first snow.",
    ]
}
