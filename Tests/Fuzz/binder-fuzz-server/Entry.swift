import Foundation
@_spi(Fuzzing) import BinderServer

// The server's own parsing of what a client sends, kept thin (the login body is `NostrEvent`'s
// JSON, fuzzed by binder-fuzz's nostr-event target). Built by `scripts/fuzz server-request`
// only: it instruments SwiftNIO too, which takes minutes. A plain build replays files.

/// Input: a request target (`/path?query`), as the first line of a request carries it.
func fuzzRequestTarget(_ bytes: [UInt8]) {
    let uri = String(decoding: bytes, as: UTF8.self)
    let (path, query) = RequestTarget.split(uri)
    if !uri.contains("?") && !uri.contains("%") && path != uri { abort() }
    _ = query
}

#if BINDER_LIBFUZZER
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    fuzzRequestTarget(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}
#else
@main
enum Replay {
    static func main() {
        for path in CommandLine.arguments.dropFirst() {
            guard let data = FileManager.default.contents(atPath: path) else { print("cannot read \(path)"); exit(1) }
            fuzzRequestTarget([UInt8](data))
            print("ok \(path)")
        }
    }
}
#endif
