import Foundation
import HTTPTypes
import Hummingbird
import TourpackCore
import TourpackHTTP

/// `GET /{z}/{x}/{y}.png`: validation, the key, faults, conditional
/// requests and caching headers around a rendered tile.
///
/// The order is a real server's: the coordinates, then the key, then the
/// tile's own fate (`--fail`, `--empty`), then a random fault, then the
/// tile with its validators (304 when the client's copy is current).
struct TileRoutes: Sendable {
    let configuration: TileServerConfiguration
    let stats: TileStats
    let dice: TileFaultDice
    let images: TileImages

    /// Every tile says it last changed one day after the Unix epoch: the
    /// pictures never change, and a fixed date keeps the headers reproducible.
    static let lastModifiedSeconds = 86_400
    static let lastModified = HTTPDate.format(epochSeconds: lastModifiedSeconds)

    static let htmlErrorPage = """
        <html><head><title>503 Service Temporarily Unavailable</title></head>\
        <body><h1>Service temporarily unavailable</h1><p>The tile service is down for maintenance. \
        Please try again later.</p></body></html>
        """

    func tile(_ request: Request, z: String?, x: String?, y: String?) async throws -> Response {
        let due = ContinuousClock.now.advanced(by: .milliseconds(dice.plan.latencyMilliseconds))
        let response = try await answer(request, z: z, x: x, y: y)
        try? await Task.sleep(until: due, clock: .continuous)
        return response
    }

    private func answer(_ request: Request, z: String?, x: String?, y: String?) async throws -> Response {
        let ifNoneMatch = request.headers[.ifNoneMatch], ifModifiedSince = request.headers[.ifModifiedSince]
        stats.arrived(
            userAgent: request.headers[.userAgent], queryKeys: request.uri.queryParameters.map { String($0.key) },
            conditional: ifNoneMatch != nil || ifModifiedSince != nil)

        guard let z = Self.coordinate(z), let x = Self.coordinate(x), let y = Self.coordinate(y) else {
            stats.update { $0.badRequests += 1 }
            return Self.text(.badRequest, "Not a tile: the path must be /{z}/{x}/{y}.png with whole numbers.")
        }
        let tile = TileID(z: z, x: x, y: y)
        guard TileFaults.isValid(tile) else {
            stats.update { $0.badRequests += 1 }
            return Self.text(.badRequest, "No such tile: z must be within 0...22 and x, y within 0..<2^z.")
        }
        let key = tile.description
        stats.update { $0.perTile[key, default: .init()].requests += 1 }

        guard isAuthorized(request) else {
            stats.update { $0.unauthorized += 1 }
            return Self.text(.unauthorized, "Missing or invalid API key.")
        }
        if dice.plan.failingTiles.contains(tile) {
            stats.fault(.permanent)
            return Self.tagged(Self.text(.internalServerError, "Internal error rendering tile \(key)."), .permanent)
        }
        if dice.plan.isEmpty(tile) {
            stats.update { $0.empty += 1 }
            return dice.plan.emptyStatus == 204 ? Response(status: .noContent) : Self.text(.notFound, "No tile data at \(key).")
        }

        let fault = dice.draw()
        if let fault { stats.fault(fault) }
        switch fault {
        case .failure:
            let status: HTTPResponse.Status = dice.next() % 2 == 0 ? .internalServerError : .serviceUnavailable
            return Self.tagged(Self.text(status, "Injected failure; try again."), .failure)
        case .rateLimited:
            var response = Self.text(.tooManyRequests, "Too many requests; slow down.")
            response.headers[.retryAfter] = String(dice.plan.retryAfterSeconds)
            return Self.tagged(response, .rateLimited)
        case .html:
            let page = ByteBuffer(string: Self.htmlErrorPage)
            return Self.tagged(
                Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: page)), .html)
        case .truncated, .permanent, nil:
            break
        }

        let image = try await images.image(for: tile)
        var headers = validatorHeaders(image)
        if Self.isNotModified(etag: image.etag, ifNoneMatch: ifNoneMatch, ifModifiedSince: ifModifiedSince), fault == nil {
            stats.update {
                $0.notModified += 1
                $0.perTile[key, default: .init()].notModified += 1
            }
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "image/png"
        if fault == .truncated {
            return Self.tagged(Self.truncated(image.png, headers: headers), .truncated)
        }
        stats.update {
            $0.ok += 1
            $0.perTile[key, default: .init()].ok += 1
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: image.png))
    }

    // MARK: Pieces

    /// `ETag`, `Last-Modified` and, unless turned off, `Cache-Control` and `Expires`.
    private func validatorHeaders(_ image: RenderedTile) -> HTTPFields {
        var headers: HTTPFields = [.eTag: image.etag, .lastModified: Self.lastModified]
        if let maxAge = configuration.maxAgeSeconds {
            headers[.cacheControl] = "max-age=\(maxAge)"
            headers[.expires] = HTTPDate.format(epochSeconds: Int(Date().timeIntervalSince1970) + maxAge)
        }
        return headers
    }

    /// RFC 9110: `If-None-Match` decides when present (`*`, or any listed
    /// tag equal under the weak comparison); otherwise `If-Modified-Since`
    /// at or after the tile's date.
    static func isNotModified(etag: String, ifNoneMatch: String?, ifModifiedSince: String?) -> Bool {
        if let ifNoneMatch {
            return ifNoneMatch.split(separator: ",").contains { candidate in
                let tag = candidate.trimmingCharacters(in: .whitespaces)
                return tag == "*" || tag == etag || tag == "W/" + etag
            }
        }
        if let ifModifiedSince, let since = HTTPDate.parse(ifModifiedSince) {
            return since >= lastModifiedSeconds
        }
        return false
    }

    /// A key is checked by exact match (in constant time) in the configured
    /// header, or else the configured query parameter. What was sent is never
    /// echoed or logged.
    private func isAuthorized(_ request: Request) -> Bool {
        guard let required = configuration.requiredAPIKey else { return true }
        let sent: String?
        if let header = configuration.apiKeyHeader.flatMap({ HTTPField.Name($0) }) {
            sent = request.headers[header]
        } else {
            sent = request.uri.queryParameters.get(configuration.apiKeyParameter)
        }
        guard let sent else { return false }
        let lhs = Array(sent.utf8), rhs = Array(required.utf8)
        guard lhs.count == rhs.count else { return false }
        return zip(lhs, rhs).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// A 200 that promises the whole tile in `Content-Length`, sends half,
    /// then drops the connection: the client sees a truncated body.
    private static func truncated(_ png: ByteBuffer, headers: HTTPFields) -> Response {
        var headers = headers
        headers[.connection] = "close"
        let length = png.readableBytes
        let half = png.getSlice(at: png.readerIndex, length: length / 2) ?? ByteBuffer()
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody(contentLength: length) { writer in
                try await writer.write(half)
                // Let the half leave before the connection is torn down.
                try? await Task.sleep(for: .milliseconds(20))
                throw TruncatedOnPurpose()
            })
    }

    /// A path segment of ASCII digits (at most 8, enough for z 22) as a number.
    static func coordinate(_ text: String?) -> Int? {
        guard let text, (1...8).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int(text)
    }

    static func text(_ status: HTTPResponse.Status, _ message: String) -> Response {
        Response(
            status: status, headers: [.contentType: "text/plain; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: message + "\n")))
    }

    static func tagged(_ response: Response, _ fault: TileFault) -> Response {
        var response = response
        response.headers[ErrorBody.faultHeader] = fault.rawValue
        return response
    }
}

/// Thrown from a truncated body's writer: Hummingbird then closes the
/// connection instead of waiting for bytes that will never come.
struct TruncatedOnPurpose: Error {}

/// HTTP dates (RFC 9110's IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT"),
/// by calendar arithmetic: no formatter, locale or time zone involved.
enum HTTPDate {
    static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func format(epochSeconds: Int) -> String {
        let days = epochSeconds >= 0 ? epochSeconds / 86_400 : (epochSeconds - 86_399) / 86_400
        let seconds = epochSeconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        let weekday = weekdays[((days % 7) + 7) % 7]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return
            "\(weekday), \(two(day)) \(months[month - 1]) \(year) \(two(seconds / 3600)):\(two(seconds / 60 % 60)):\(two(seconds % 60)) GMT"
    }

    /// Seconds since the epoch, or nil for anything but an IMF-fixdate.
    static func parse(_ text: String) -> Int? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]),
            let monthIndex = months.firstIndex(of: String(parts[2]))
        else { return nil }
        let time = parts[4].split(separator: ":").compactMap { Int($0) }
        guard time.count == 3, (1...31).contains(day), (0...23).contains(time[0]), (0...59).contains(time[1]), (0...60).contains(time[2])
        else {
            return nil
        }
        return days(fromCivil: year, monthIndex + 1, day) * 86_400 + time[0] * 3600 + time[1] * 60 + time[2]
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date.
    static func days(fromCivil year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01.
    static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shifted = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shifted + 2) / 5 + 1
        let month = shifted < 10 ? shifted + 3 : shifted - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
