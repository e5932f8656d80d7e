internal import CGit2
import Glibc

/// One request of git's Smart HTTP protocol (stateless RPC), as libgit2's smart transport asks
/// for it during a fetch or a push.
public enum SmartHTTPService: Sendable, Equatable {
    /// `GET info/refs?service=git-upload-pack`: the refs a fetch can ask for.
    case uploadPackAdvertisement
    /// `POST git-upload-pack`: wants and haves in, a pack out.
    case uploadPack
    /// `GET info/refs?service=git-receive-pack`: the refs a push updates.
    case receivePackAdvertisement
    /// `POST git-receive-pack`: ref updates and a pack in, a report out.
    case receivePack

    /// The path under the repository's URL.
    public var path: String {
        switch self {
        case .uploadPackAdvertisement: return "/info/refs?service=git-upload-pack"
        case .uploadPack: return "/git-upload-pack"
        case .receivePackAdvertisement: return "/info/refs?service=git-receive-pack"
        case .receivePack: return "/git-receive-pack"
        }
    }

    public var isAdvertisement: Bool { self == .uploadPackAdvertisement || self == .receivePackAdvertisement }

    /// `git-upload-pack` or `git-receive-pack`.
    public var serviceName: String {
        self == .uploadPackAdvertisement || self == .uploadPack ? "git-upload-pack" : "git-receive-pack"
    }

    init?(_ action: git_smart_service_t) {
        switch action {
        case GIT_SERVICE_UPLOADPACK_LS: self = .uploadPackAdvertisement
        case GIT_SERVICE_UPLOADPACK: self = .uploadPack
        case GIT_SERVICE_RECEIVEPACK_LS: self = .receivePackAdvertisement
        case GIT_SERVICE_RECEIVEPACK: self = .receivePack
        default: return nil
        }
    }
}

/// Carries git's Smart HTTP requests over the caller's own HTTP client instead of libgit2's:
/// the caller bounds every answer (size, time), retries a failed request on its own, and keeps
/// why a transfer failed as a typed error. libgit2 still speaks the git protocol (pkt-lines,
/// negotiation, packs) and writes the objects.
///
/// Called on the thread running the fetch or push, with the repository's lock held: an
/// exchange may block (it is the network), and must not touch the same repository.
public protocol SmartHTTPCarrier: AnyObject, Sendable {
    /// Sends one request (`body` is empty for an advertisement) and returns the whole answer
    /// body. A throw fails the transfer; the carrier keeps the reason for its caller.
    func exchange(_ service: SmartHTTPService, body: [UInt8]) throws -> SmartHTTPAnswer
}

/// An answer's body as a carrier hands it over: in memory, or spooled to a file (a fetched
/// pack, up to a GiB: libgit2 then reads it in parts and memory stays bounded).
public enum SmartHTTPAnswer: Sendable {
    case bytes([UInt8])
    /// An open file holding the body from offset 0: read with `pread`, and closed when libgit2
    /// is done with the request (the stream owns it from here).
    case file(descriptor: Int32)
}

/// The file a carrier spools an answer into as it arrives (a fetched pack): made in the
/// repository's git directory (ciphertext, on the disk its objects go to), its name removed at
/// once, so that nothing is left behind whatever happens to the transfer or the process.
public enum SpoolFile {
    /// A new unnamed file in `directory`, open for reading and writing.
    public static func create(in directory: String) throws(GitError) -> Int32 {
        let (descriptor, path) = try PackWriter.makeTemporary(in: directory, prefix: "binder-incoming-pack-")
        unlink(path)
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        return descriptor
    }

    /// Appends all of `bytes`; the OS error's errno when that failed, else 0.
    public static func append(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> Int32 {
        PackWriter.writeAll(bytes, to: descriptor) ? 0 : errno
    }
}

// MARK: - libgit2 glue

/// libgit2 hands our callbacks back the C structs we gave it; each is allocated with a pointer
/// to the Swift object behind it right after it (one allocation, freed by libgit2's `free`
/// callback, which also releases the object).
enum TrailedStruct {
    static func allocate<C>(_ value: C, owner: AnyObject) -> UnsafeMutablePointer<C> {
        let raw = UnsafeMutableRawPointer.allocate(byteCount: MemoryLayout<C>.stride + MemoryLayout<UnsafeMutableRawPointer>.stride,
                                                   alignment: max(MemoryLayout<C>.alignment, MemoryLayout<UnsafeMutableRawPointer>.alignment))
        let typed = raw.bindMemory(to: C.self, capacity: 1)
        typed.initialize(to: value)
        (raw + MemoryLayout<C>.stride).storeBytes(of: Unmanaged.passRetained(owner).toOpaque(), as: UnsafeMutableRawPointer.self)
        return typed
    }

    static func owner<C, O: AnyObject>(_ pointer: UnsafeMutablePointer<C>, as _: O.Type) -> O {
        let raw = UnsafeMutableRawPointer(pointer) + MemoryLayout<C>.stride
        return Unmanaged<O>.fromOpaque(raw.load(as: UnsafeMutableRawPointer.self)).takeUnretainedValue()
    }

    static func free<C>(_ pointer: UnsafeMutablePointer<C>) {
        let raw = UnsafeMutableRawPointer(pointer) + MemoryLayout<C>.stride
        Unmanaged<AnyObject>.fromOpaque(raw.load(as: UnsafeMutableRawPointer.self)).release()
        pointer.deinitialize(count: 1)
        UnsafeMutableRawPointer(pointer).deallocate()
    }
}

/// The state of one fetch or push carried by a `SmartHTTPCarrier`: the subtransport definition
/// libgit2's smart transport is built from. Owned by the fetch or push call (it outlives
/// libgit2's use of it: the remote is freed before the call returns).
final class CarriedTransport {
    let carrier: any SmartHTTPCarrier
    let definition: UnsafeMutablePointer<git_smart_subtransport_definition>

    init(_ carrier: any SmartHTTPCarrier) {
        self.carrier = carrier
        definition = .allocate(capacity: 1)
        definition.initialize(to: git_smart_subtransport_definition(callback: makeSubtransport, rpc: 1, param: nil))
        definition.pointee.param = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        definition.deinitialize(count: 1)
        definition.deallocate()
    }

    /// For `git_remote_callbacks.transport`: builds libgit2's smart transport on our subtransport.
    static let transportCallback: git_transport_cb = { out, owner, payload in
        guard let payload else { return -1 }
        let box = Unmanaged<RemoteCallbackBox>.fromOpaque(payload).takeUnretainedValue()
        guard let carried = box.carried else { return -1 }
        return git_transport_smart(out, owner, carried.definition)
    }
}

/// One subtransport (libgit2 makes one per transport): opens a stream per request.
private final class Subtransport {
    let carrier: any SmartHTTPCarrier
    init(_ carrier: any SmartHTTPCarrier) { self.carrier = carrier }
}

/// One request: libgit2 writes the request body, then reads the answer; the request is sent
/// (by the carrier, whole) at the first read.
private final class SmartStream {
    let carrier: any SmartHTTPCarrier
    let service: SmartHTTPService
    var request: [UInt8] = []
    var answer: SmartHTTPAnswer?
    var offset = 0

    init(carrier: any SmartHTTPCarrier, service: SmartHTTPService) {
        self.carrier = carrier
        self.service = service
    }

    deinit {
        if case .file(let descriptor) = answer { close(descriptor) }
    }

    /// Copies the answer's next bytes into `buffer`; nil when reading the spool file failed.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        switch answer {
        case .bytes(let bytes):
            let count = min(buffer.count, bytes.count - offset)
            guard count > 0 else { return 0 }
            bytes.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + count]))
            }
            offset += count
            return count
        case .file(let descriptor):
            while true {
                let count = pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { return nil }
                offset += count
                return count
            }
        case nil:
            return nil
        }
    }
}

private func makeSubtransport(_ out: UnsafeMutablePointer<UnsafeMutablePointer<git_smart_subtransport>?>?,
                              _ owner: UnsafeMutablePointer<git_transport>?, _ param: UnsafeMutableRawPointer?) -> Int32 {
    guard let out, let param else { return -1 }
    let carried = Unmanaged<CarriedTransport>.fromOpaque(param).takeUnretainedValue()
    let value = git_smart_subtransport(action: subtransportAction, close: { _ in 0 }, free: { pointer in
        if let pointer { TrailedStruct.free(pointer) }
    })
    out.pointee = TrailedStruct.allocate(value, owner: Subtransport(carried.carrier))
    return 0
}

private func subtransportAction(_ out: UnsafeMutablePointer<UnsafeMutablePointer<git_smart_subtransport_stream>?>?,
                                _ transport: UnsafeMutablePointer<git_smart_subtransport>?, _ url: UnsafePointer<CChar>?,
                                _ action: git_smart_service_t) -> Int32 {
    guard let out, let transport, let service = SmartHTTPService(action) else {
        git_error_set_str(Int32(GIT_ERROR_NET.rawValue), "unsupported smart transport action")
        return -1
    }
    let subtransport = TrailedStruct.owner(transport, as: Subtransport.self)
    let value = git_smart_subtransport_stream(subtransport: transport, read: streamRead, write: streamWrite, free: { pointer in
        if let pointer { TrailedStruct.free(pointer) }
    })
    out.pointee = TrailedStruct.allocate(value, owner: SmartStream(carrier: subtransport.carrier, service: service))
    return 0
}

private func streamWrite(_ stream: UnsafeMutablePointer<git_smart_subtransport_stream>?, _ buffer: UnsafePointer<CChar>?,
                         _ length: Int) -> Int32 {
    guard let stream else { return -1 }
    let state = TrailedStruct.owner(stream, as: SmartStream.self)
    guard state.answer == nil, !state.service.isAdvertisement else {
        git_error_set_str(Int32(GIT_ERROR_NET.rawValue), "write after the request was sent")
        return -1
    }
    if let buffer, length > 0 {
        buffer.withMemoryRebound(to: UInt8.self, capacity: length) { state.request.append(contentsOf: UnsafeBufferPointer(start: $0, count: length)) }
    }
    return 0
}

private func streamRead(_ stream: UnsafeMutablePointer<git_smart_subtransport_stream>?, _ buffer: UnsafeMutablePointer<CChar>?,
                        _ size: Int, _ bytesRead: UnsafeMutablePointer<Int>?) -> Int32 {
    guard let stream, let buffer, let bytesRead else { return -1 }
    let state = TrailedStruct.owner(stream, as: SmartStream.self)
    if state.answer == nil {
        do {
            state.answer = try state.carrier.exchange(state.service, body: state.request)
            state.request = []
        } catch {
            // The carrier keeps the typed reason; libgit2 gets words for its own message.
            git_error_set_str(Int32(GIT_ERROR_NET.rawValue), "\(state.service.serviceName) request failed")
            return -1
        }
    }
    guard let count = state.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: size)) else {
        git_error_set_str(Int32(GIT_ERROR_OS.rawValue), "cannot read the spooled \(state.service.serviceName) answer")
        return -1
    }
    bytesRead.pointee = count
    return 0
}
