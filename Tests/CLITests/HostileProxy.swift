import Foundation
import TourpackTesting

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A loopback proxy in front of the real `serve-tts` that changes one field
/// of an answer: a sentence time (huge, negative, or the times reversed),
/// or the audio (none, one byte, half of it). Only answers to requests
/// whose body holds a marker are changed (every try of them), so a test
/// can aim at one chunk of a narration; the rest pass through untouched.
final class HostileProxy: @unchecked Sendable {
    enum Fault: Sendable, Equatable {
        /// Every sentence time after the first becomes this (Google's `timeSeconds`,
        /// ElevenLabs' `character_start_times_seconds`, Polly's mark `time`, in ms).
        case time(Double)
        /// The sentence times in reverse order.
        case decreasingTimes
        /// A 200 carrying no audio: an empty body, or an empty base64 field.
        case noAudio
        /// The audio's first byte only.
        case oneByte
        /// The first half of the body.
        case halfBody
    }

    private let lock = NSLock()
    private var faults: [Fault] = []
    private var markers: [String] = []
    private var forwarded: [String] = []
    private var server: CaptureServer!
    let upstream: String
    var endpoint: String { "http://127.0.0.1:\(server.port)" }

    init(upstream: String) throws {
        self.upstream = upstream
        server = try CaptureServer(answerRequest: { [unowned self] head, body in self.answer(head, body) })
    }

    /// From now on, answers to requests holding one of `markers` (all when
    /// none is given) get `faults`, one after another by request; no
    /// faults: honest answers.
    func aim(_ faults: [Fault], at markers: [String] = []) {
        lock.withLock {
            self.faults = faults
            self.markers = markers
        }
    }

    /// The bodies of the requests forwarded so far, as text; `reset` forgets them.
    var requests: [String] { lock.withLock { forwarded } }
    func reset() { lock.withLock { forwarded = [] } }

    func stop() { server.stop() }

    private func answer(_ head: String, _ body: [UInt8]) -> (status: Int, headers: [String], body: [UInt8]) {
        let lines = head.components(separatedBy: "\r\n")
        let target = lines.first?.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
        let text = String(decoding: body, as: UTF8.self)
        var request = URLRequest(url: URL(string: upstream + target)!)
        request.httpMethod = "POST"
        request.httpBody = Data(body)
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !["host", "content-length", "connection", "expect", "accept-encoding"].contains(parts[0].lowercased())
            else { continue }
            request.setValue(parts[1], forHTTPHeaderField: parts[0])
        }
        // What the request asks to be spoken: ElevenLabs' neighbouring text (for prosody) is not aimed at.
        var spoken = text
        if var object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] {
            object["previous_text"] = nil
            object["next_text"] = nil
            spoken = String(decoding: Self.serialize(object), as: UTF8.self)
        }
        let fault: Fault? = lock.withLock {
            forwarded.append(text)
            guard !faults.isEmpty, markers.isEmpty || markers.contains(where: { spoken.contains($0) }) else { return nil }
            return faults[(forwarded.count - 1) % faults.count]
        }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: (Int, [String], [UInt8]) = (502, [], Array("proxy: no answer".utf8))
        URLSession.shared.dataTask(with: request) { data, response, _ in
            if let response = response as? HTTPURLResponse {
                let type = response.value(forHTTPHeaderField: "Content-Type") ?? "application/octet-stream"
                result = (response.statusCode, ["Content-Type: \(type)"], Array(data ?? Data()))
            }
            done.signal()
        }.resume()
        done.wait()
        guard let fault, (200..<300).contains(result.0) else { return result }
        return (result.0, result.1, Self.change(result.2, type: result.1.first ?? "", by: fault))
    }

    /// The answer with one field changed.
    static func change(_ body: [UInt8], type: String, by fault: Fault) -> [UInt8] {
        if fault == .halfBody { return Array(body.prefix(body.count / 2)) }
        if type.lowercased().contains("json"), var object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] {
            // Google (audioContent, timepoints) and ElevenLabs' with-timestamps (audio_base64, alignment).
            let audioKey = object["audioContent"] != nil ? "audioContent" : "audio_base64"
            switch fault {
            case .noAudio: object[audioKey] = ""
            case .oneByte:
                object[audioKey] = Data((Data(base64Encoded: object[audioKey] as? String ?? "") ?? Data()).prefix(1)).base64EncodedString()
            case .time(let value): object = changeTimes(object) { times in times.enumerated().map { $0.offset == 0 ? $0.element : value } }
            case .decreasingTimes: object = changeTimes(object) { Array($0.reversed()) }
            case .halfBody: break
            }
            return Array(serialize(object))
        }
        if type.lowercased().contains("json") {
            // Polly's speech marks, one object a line; `time` in ms.
            var lines = String(decoding: body, as: UTF8.self).split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            let times = lines.map { ($0["time"] as? NSNumber)?.doubleValue ?? 0 }
            let changed: [Double]
            switch fault {
            case .time(let value): changed = times.enumerated().map { $0.offset == 0 ? $0.element : value }
            case .decreasingTimes: changed = times.reversed()
            default: changed = times
            }
            for index in lines.indices { lines[index]["time"] = changed[index] }
            return Array(lines.map { String(decoding: serialize($0), as: UTF8.self) }.joined(separator: "\n").utf8) + [10]
        }
        // Raw audio: PCM or a WAV.
        switch fault {
        case .noAudio: return []
        case .oneByte: return Array(body.prefix(1))
        default: return body
        }
    }

    private static func changeTimes(_ object: [String: Any], _ change: ([Double]) -> [Double]) -> [String: Any] {
        var object = object
        if var points = object["timepoints"] as? [[String: Any]] {
            let times = change(points.map { ($0["timeSeconds"] as? NSNumber)?.doubleValue ?? 0 })
            for index in points.indices { points[index]["timeSeconds"] = times[index] }
            object["timepoints"] = points
        }
        for key in ["alignment", "normalized_alignment"] {
            guard var alignment = object[key] as? [String: Any], let starts = alignment["character_start_times_seconds"] as? [NSNumber]
            else { continue }
            alignment["character_start_times_seconds"] = change(starts.map(\.doubleValue))
            object[key] = alignment
        }
        return object
    }

    /// JSON as a provider would send it: a number too big for JSONSerialization's writer is written as it is.
    private static func serialize(_ object: [String: Any]) -> Data {
        (try? JSONSerialization.data(withJSONObject: object)) ?? Data("{}".utf8)
    }
}
