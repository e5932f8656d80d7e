import Foundation
import XCTest

/// The commands reach a binder through the core's API (BinderCore, BinderSync, BinderExport,
/// BinderServer), not git's or the crypto's (issue 45): a command file that imports BinderGit
/// or BinderCrypto is in this table with the reason, and a new import fails here until it is.
final class CommandImportsTests: XCTestCase {
    /// File → the imports it may have, and why.
    static let allowed: [String: (imports: Set<String>, why: String)] = [
        "BinderCommand.swift": (["BinderCrypto"], "catches SecureMemoryError to say 'out of secret memory'"),
        "DaemonLauncher.swift": (["BinderCrypto"], "hands the daemon its secret in SecureBytes"),
        "KeyCommands.swift": (["BinderCrypto"], "key management: generate, import (nsec, hex, ncryptsec), NIP-49"),
        "KeyPassphraseCommand.swift": (["BinderCrypto"], "key management: the key under a new passphrase (NIP-49)"),
        "KeyRotateCommand.swift": (["BinderCrypto"], "key management: the new key generated or imported (nsec, hex, ncryptsec), NIP-49"),
        "KeyRotationRun.swift": (["BinderCrypto"], "key management: the old and new keys (SecretKey) a rotation carries the binders, book and tokens between"),
        "KeyStore.swift": (["BinderCrypto"], "key management: the key file (NIP-49) and the public key"),
        "LockCommands.swift": (["BinderCrypto"], "key management: the key cached in the kernel keyring"),
        "MountCommand.swift": (["BinderCrypto"], "the daemon's key: SecretKey, handed over in SecureBytes"),
        "OpenShareCommand.swift": (["BinderCrypto"], "the payload handed to the daemon in SecureBytes; the share's key passed to the view"),
        "Reports.swift": (["BinderCrypto"], "list logs in to the server with the user's key (SecretKey)"),
        "RetiredKeys.swift": (["BinderCrypto"], "key management: a retired key's ncryptsec opened with its old passphrase (NIP-49)"),
        "RotatedBinderSync.swift": (["BinderCrypto"], "key management: the retired key opened and logged in with (SecretKey, the old npub's PublicKey)"),
        "ShareBook.swift": (["BinderCrypto"], "the user's key (SecretKey) that seals the book's secrets and collects"),
        "ShareCommand.swift": (["BinderCrypto"], "the user's key (SecretKey) and the binder's conversation key the staging copy is read with"),
    ]

    func testOnlyTheFilesInTheTableImportGitOrCrypto() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Sources/BinderCommands").standardizedFileURL
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }
        XCTAssertGreaterThan(files.count, 20)
        var seen: Set<String> = []
        for file in files {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            let imports = Set(text.split(separator: "\n").compactMap { line -> String? in
                let words = line.split(separator: " ").map(String.init)
                guard let at = words.firstIndex(of: "import"), at + 1 < words.count,
                      words[..<at].allSatisfy({ $0.hasPrefix("@") || ["internal", "public", "package", "private", "fileprivate"].contains($0) }),
                      ["BinderGit", "BinderCrypto"].contains(words[at + 1]) else { return nil }
                return words[at + 1]
            })
            guard !imports.isEmpty else { continue }
            seen.insert(file)
            let allowed = Self.allowed[file]?.imports ?? []
            XCTAssertTrue(imports.isSubset(of: allowed),
                          "\(file) imports \(imports.subtracting(allowed).sorted()): go through the core's API, or argue for it in this table")
            XCTAssertEqual(imports, allowed, "\(file) no longer imports \(allowed.subtracting(imports).sorted()): take it out of the table")
        }
        XCTAssertEqual(Set(Self.allowed.keys).subtracting(seen), [], "in the table but importing neither")
    }
}
