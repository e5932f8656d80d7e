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
            fuzzRequestTarget(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
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
            fuzzRequestTarget([UInt8](data))
            print("ok \(path)")
        }
    }
}
#endif
