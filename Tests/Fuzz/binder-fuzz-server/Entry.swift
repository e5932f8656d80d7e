import Foundation
@_spi(Fuzzing) import BinderServer

// What the server reads from a client before anything else sees it, kept thin (the login body
// is `NostrEvent`'s JSON, fuzzed by binder-fuzz's nostr-event target; HTTP parsing is
// Hummingbird's and SwiftNIO's). Built by `scripts/fuzz server-request` only: it instruments
// Hummingbird and SwiftNIO too, which takes minutes. A plain build replays files.
// The first byte picks the decoder: a repository id from a request path, the start of a
// receive-pack or upload-pack body (push-to-create and the git engine read them), a gzip/deflate request body, or a forwarding
// header from a trusted proxy (`--trusted-proxy`; then 0: X-Forwarded-For, 1: Forwarded).
func fuzzServerInput(_ bytes: [UInt8]) {
    guard let selector = bytes.first else { return }
    let rest = Array(bytes.dropFirst())
    switch selector % 4 {
    case 0:
        let id = String(decoding: rest, as: UTF8.self)
        // A valid id is a plain folder name: never an option, hidden, nested, or upper case.
        if RepositoryID.isValid(id) && (id.hasPrefix("-") || id.hasPrefix(".") || id.contains("/") || id.contains("%")
                                        || id.lowercased() != id || id.utf8.count > RepositoryID.maxLength) { abort() }
    case 1:
        // A git request body: receive-pack's commands (push-to-create and the git engine read
        // them) and upload-pack's wants and haves (the git engine's negotiation).
        if let request = ReceivePackRequest.parse(rest) {
            if request.createsBranchesWithObjects, request.commands.isEmpty || request.packObjects == nil { abort() }
            if request.packOffset > rest.count { abort() }
        }
        if let request = UploadPackRequest.parse(rest), request.wants.isEmpty, !request.haves.isEmpty { abort() }
    case 3:
        // The client is always one canonical address: the peer's, or one the header names.
        let header: ForwardedHeader = rest.first.map { $0 % 2 == 0 ? .xForwardedFor : .forwarded } ?? .xForwardedFor
        let values = String(decoding: rest.dropFirst(), as: UTF8.self).split(separator: "\n").map(String.init)
        let rule = ClientAddressRule(trusting: [IPNetwork("127.0.0.0/8")!, IPNetwork("fd00::/8")!], header: header)
        let client = rule.client(peer: "127.0.0.1", headerValues: values)
        guard let bytes = IPNetwork.addressBytes(client), IPNetwork.text(bytes) == client else { abort() }
        if rule.client(peer: "203.0.113.9", headerValues: values) != "203.0.113.9" { abort() }   // untrusted: ignored
    default:
        // Decompressed bytes never pass the limit, whatever the input.
        let limit = 1 << 16
        guard let inflater = try? BodyInflater(encoding: rest.first.map { $0 % 2 == 0 ? "gzip" : "deflate" }, limit: limit) else { return }
        let emitted = (try? inflater.feed(bytes: Array(rest.dropFirst()))) ?? 0
        if emitted > limit { abort() }
    }
}

#if BINDER_LIBFUZZER
// As in binder-fuzz: SwiftPM renames the entry point, so ours runs libFuzzer's driver.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

@main
enum Fuzz {
    static func main() {
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
            fuzzServerInput(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
            return 0
        })
    }
}
#else
@main
enum Replay {
    static func main() {
        for path in CommandLine.arguments.dropFirst() {
            guard let data = FileManager.default.contents(atPath: path) else { print("cannot read \(path)"); exit(1) }
            fuzzServerInput([UInt8](data))
            print("ok \(path)")
        }
    }
}
#endif
