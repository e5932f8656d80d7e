internal import CLinux
import Glibc

/// A control request that carries bytes (`binder import` on a mounted binder): the line
/// `WORD LENGTH` (WORD one of `requests`), then LENGTH bytes; the answer is `ok LENGTH` and
/// LENGTH bytes, or a `ControlRefusal` line. The bytes (an import's records, in plaintext) live
/// in the two processes' memory and the socket's kernel buffers only, never in a file.
public enum ControlPayload {
    public static let requests: Set<String> = [ControlRequest.importRecords]
    /// The most either side sends: 256 MiB, the mount's default largest attachment. The mount
    /// holds a request whole in memory, with what it makes of it, while it stores it.
    public static let maximumBytes = 256 << 20

    public struct Answer: Sendable {
        public var line: String
        public var payload: [UInt8]

        public static func ok(_ payload: [UInt8]) -> Answer { Answer(line: "ok \(payload.count)", payload: payload) }
        public static func refused(_ refusal: ControlRefusal) -> Answer { Answer(line: refusal.line, payload: []) }
    }

    /// The length a request line declares, when it is one of `requests` (`import 1234`).
    static func declaredLength(_ request: String) -> Int? {
        let words = request.split(separator: " ")
        guard words.count == 2, requests.contains(String(words[0])), let length = Int(words[1]), length >= 0 else { return nil }
        return length
    }

    /// The payload that follows a request line (`rest`: what came with the line), or nil when
    /// the peer stopped short or declared more than `maximumBytes` (refused, with an answer).
    static func receive(_ fd: Int32, request: String, length: Int, rest: [UInt8]) -> [UInt8]? {
        guard length <= maximumBytes else {
            ControlLine.write(fd, ControlRefusal.tooLarge(bytes: length).line)
            shutdown(fd, Int32(SHUT_WR))
            return nil
        }
        return ControlLine.read(fd, count: length, received: rest)
    }
}

/// A request the mount refused, as it crosses the control channel: a code the asker acts on
/// (never the message), the errno, and a message for people. On the wire:
/// `error CODE ERRNO MESSAGE`.
public struct ControlRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// Over `ControlPayload.maximumBytes` (E2BIG).
        case tooLarge = "too-large"
        /// A payload that does not decode (EINVAL).
        case malformed
        /// A read-only mount (EROFS).
        case readOnly = "read-only"
        /// An import about someone other than the binder's patient-info, without --force.
        case differentPatient = "different-patient"
        /// The binder's records cannot be read.
        case unreadable
        /// Storing failed; nothing was stored.
        case storage
        /// A sync: the server's copy was deleted by its owner (the binder moved to a new key on
        /// another device, or was deleted there) (ESTALE).
        case moved
        /// A mount that does not know the request (an older binder), or an answer not understood.
        case other
    }

    public var code: Code
    public var errno: Int32
    public var message: String

    public init(code: Code, errno: Int32, message: String) {
        self.code = code
        self.errno = errno
        self.message = message
    }

    public static func tooLarge(bytes: Int) -> ControlRefusal {
        ControlRefusal(code: .tooLarge, errno: E2BIG, message: "\(bytes) bytes is more than the \(ControlPayload.maximumBytes >> 20) MiB "
                       + "one request through a mount carries: import fewer files at once, or unmount the binder and import")
    }

    public var line: String { "error \(code.rawValue) \(errno) \(message)" }

    /// An `error …` answer; one not in this form (an older mount's) is `other`, its text the message.
    public init(answer: String) {
        let text = answer.hasPrefix("error ") ? String(answer.dropFirst("error ".count)) : answer
        let words = text.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        if words.count == 3, let code = Code(rawValue: String(words[0])), let number = Int32(words[1]) {
            self.init(code: code, errno: number, message: String(words[2]))
        } else {
            self.init(code: .other, errno: EPROTO, message: text)
        }
    }

    public var description: String { message }
}

extension ControlClient {
    /// Sends `request` (one of `ControlPayload.requests`) with `payload` and returns the bytes
    /// of an `ok` answer, or the mount's refusal. A payload over `ControlPayload.maximumBytes`
    /// is refused here, unsent.
    public static func exchange(_ request: String, payload: [UInt8], to path: String) throws(ControlChannelError)
        -> Result<[UInt8], ControlRefusal> {
        guard payload.count <= ControlPayload.maximumBytes else { return .failure(.tooLarge(bytes: payload.count)) }
        let fd = binder_unix_connect(path)
        guard fd >= 0 else { throw ControlChannelError("cannot reach the mount at \(path)", errno) }
        defer { close(fd) }
        ControlLine.write(fd, "\(request) \(payload.count)")
        ControlLine.send(fd, payload)
        var rest: [UInt8] = []
        guard let answer = ControlLine.read(fd, rest: &rest) else { throw ControlChannelError("the mount did not answer", ECONNRESET) }
        let words = answer.split(separator: " ")
        guard words.count == 2, words[0] == "ok", let length = Int(words[1]), length >= 0 else { return .failure(ControlRefusal(answer: answer)) }
        guard length <= ControlPayload.maximumBytes else { return .failure(.tooLarge(bytes: length)) }
        guard let bytes = ControlLine.read(fd, count: length, received: rest) else {
            throw ControlChannelError("the mount's answer stopped short", ECONNRESET)
        }
        return .success(bytes)
    }
}
