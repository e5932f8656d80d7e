import Foundation

// Built by scripts/fuzz with `-sanitize=fuzzer -D BINDER_LIBFUZZER`: libFuzzer's driver calls
// `LLVMFuzzerTestOneInput` with each input, for the target named by BINDER_FUZZ_TARGET.
// Built plainly (`swift build`), the same code is a replayer:
// `binder-fuzz TARGET FILE...` runs the target once on each file.

/// The target chosen for this process (libFuzzer runs one target per process).
let selectedTarget: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["BINDER_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget.all[name] else {
        FileHandle.standardError.write(Data("BINDER_FUZZ_TARGET must be one of: \(FuzzTarget.names.joined(separator: " "))\n".utf8))
        exit(2)
    }
    return target
}()

#if BINDER_LIBFUZZER
// SwiftPM gives an executable's entry point its own name, so libFuzzer's `main` is not used:
// ours hands the command line to libFuzzer's driver.
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
            selectedTarget.run(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
            return 0
        })
    }
}
#else
@main
enum Replay {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard let name = arguments.first, let target = FuzzTarget.all[name] else {
            print("usage: binder-fuzz TARGET FILE...   (targets: \(FuzzTarget.names.joined(separator: " ")))")
            print("Fuzzing itself: scripts/fuzz [--seconds N] [TARGET...]")
            exit(2)
        }
        for path in arguments.dropFirst() {
            guard let data = FileManager.default.contents(atPath: path) else {
                print("cannot read \(path)")
                exit(1)
            }
            target.run([UInt8](data))
            print("ok \(path)")
        }
    }
}
#endif

/// One fuzz target: a decoder fed arbitrary bytes. A target traps (crashes the process) only
/// when a property it checks fails; every other trap is a bug in the decoder.
struct FuzzTarget: Sendable {
    let run: @Sendable ([UInt8]) -> Void

    static let all: [String: FuzzTarget] = [
        "nip44": FuzzTarget(run: CryptoTargets.nip44),
        "nip49": FuzzTarget(run: CryptoTargets.nip49),
        "bech32": FuzzTarget(run: CryptoTargets.bech32),
        "sidecar": FuzzTarget(run: CryptoTargets.sidecar),
        "nostr-event": FuzzTarget(run: CryptoTargets.nostrEvent),
        "json": FuzzTarget(run: FormatTargets.json),
        "document": FuzzTarget(run: FormatTargets.document),
        "front-matter": FuzzTarget(run: FormatTargets.frontMatter),
        "timestamps": FuzzTarget(run: FormatTargets.timestamps),
        "scan-invitation": FuzzTarget(run: FormatTargets.scanInvitation),
        "listing-index": FuzzTarget(run: IndexTargets.listingIndex),
        "tree-delta": FuzzTarget(run: IndexTargets.treeDelta),
        "pushed-tree": FuzzTarget(run: IndexTargets.pushedTree),
        "pushed-pack": FuzzTarget(run: IndexTargets.pushedPack),
        "import": FuzzTarget(run: ImportTargets.source),
        "import-request": FuzzTarget(run: ImportTargets.request),
    ]

    static var names: [String] { all.keys.sorted() }
}

/// Fails the run with a message (libFuzzer then saves the input as a crash reproducer).
func check(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() {
        FileHandle.standardError.write(Data("property failed: \(message())\n".utf8))
        abort()
    }
}

/// Splits a fuzz input into a selector byte and the rest.
func split(_ bytes: [UInt8]) -> (selector: UInt8, rest: [UInt8]) {
    guard let first = bytes.first else { return (0, []) }
    return (first, Array(bytes.dropFirst()))
}
