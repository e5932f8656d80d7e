import Foundation
@testable import BinderFormat

/// The sample binder's manifest (copied from shared/fixtures): every document's exact
/// decrypted plaintext and its JSON, as written by an independent implementation.
enum Fixture {
    struct Document {
        let path: String
        let plaintext: String
        let json: JSONValue
    }

    static let manifest: JSONObject = {
        guard let url = Bundle.module.url(forResource: "sample-binder.manifest", withExtension: "json",
                                          subdirectory: "Fixtures"),
              let data = try? Data(contentsOf: url),
              let value = try? JSONValue.parse([UInt8](data)),
              let object = value.objectValue else {
            fatalError("Fixtures/sample-binder.manifest.json is missing or unreadable")
        }
        return object
    }()

    static let documents: [Document] = entries(of: "documents")
    static let folderMetadata: [Document] = entries(of: "folder_meta")

    static var sidecars: JSONObject { manifest["sidecars"]?.objectValue ?? JSONObject() }

    private static func entries(of key: String) -> [Document] {
        (manifest[key]?.objectValue ?? JSONObject()).map { entry in
            let fields = entry.value.objectValue ?? JSONObject()
            return Document(path: entry.key,
                            plaintext: fields["plaintext"]?.stringValue ?? "",
                            json: fields["json"] ?? .null)
        }
    }
}

/// A small deterministic generator (SplitMix64) so property tests are reproducible.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension String {
    var bytes: [UInt8] { Array(utf8) }
}
