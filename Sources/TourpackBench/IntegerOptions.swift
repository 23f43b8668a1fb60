/// A bench's `--name N` options, all integers: each starts at its default,
/// takes the value given (a value that is not a number keeps the default),
/// and is raised to its floor. An unknown option is an error.
struct IntegerOptions {
    private var values: [String: Int]

    init(_ arguments: [String], _ options: [String: (default: Int, floor: Int)]) throws {
        values = options.mapValues(\.default)
        var index = 0
        while index < arguments.count {
            let name = arguments[index]
            guard let option = options[name] else { throw BenchError("unknown option \(name)") }
            let value = index + 1 < arguments.count ? Int(arguments[index + 1]) : nil
            values[name] = max(option.floor, value ?? option.default)
            index += 2
        }
    }

    subscript(_ name: String) -> Int { values[name]! }
}
