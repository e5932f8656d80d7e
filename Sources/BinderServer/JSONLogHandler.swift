import Foundation
import Logging
import Synchronization

/// `binder serve --log-format json`: one JSON object per line on standard error, `{"time",
/// "level", "message", "label", "metadata"}`, for a log collector. It says exactly what the
/// text lines say (the same messages and metadata, which never hold a token, a key or a
/// request's query), only framed so that no message can forge or break a line.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let output: JSONLogOutput

    public init(label: String, output: JSONLogOutput = .standardError) {
        self.label = label
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let given = event.metadata { merged.merge(given) { $1 } }
        output.write(Self.line(time: Date(), level: event.level, message: "\(event.message)", label: label, metadata: merged))
    }

    /// One line: the JSON object and a newline.
    static func line(time: Date, level: Logger.Level, message: String, label: String, metadata: Logger.Metadata) -> [UInt8] {
        var object: [String: Any] = ["time": Self.timeText(time), "level": level.rawValue, "message": message, "label": label]
        if !metadata.isEmpty { object["metadata"] = metadata.mapValues(Self.plain) }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data(#"{"level":"error","message":"a log line could not be encoded"}"#.utf8)
        return Array(data) + [UInt8(ascii: "\n")]
    }

    private static func plain(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): return text
        case .stringConvertible(let value): return "\(value)"
        case .array(let values): return values.map(plain)
        case .dictionary(let values): return values.mapValues(plain)
        }
    }

    /// RFC 3339 in UTC with milliseconds.
    static func timeText(_ time: Date) -> String {
        time.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

/// Where JSON lines go: written whole, one at a time (a lock), so lines never interleave.
public final class JSONLogOutput: Sendable {
    private let descriptor: Int32
    /// Guards writes to the descriptor.
    private let lock = Mutex(())

    public init(descriptor: Int32) { self.descriptor = descriptor }

    public static let standardError = JSONLogOutput(descriptor: 2)

    func write(_ bytes: [UInt8]) {
        lock.withLock { _ in
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = Foundation.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 && errno == EINTR { continue }
                    guard written > 0 else { return }
                    offset += written
                }
            }
        }
    }
}
