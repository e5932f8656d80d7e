import Foundation
import XCTest
@testable import BinderGit

/// `ServedRepository.soleStoredPack(reaching:)`: the engine sends a stored pack as it is only
/// when the repository is that one pack and it holds the whole history of the wants.
final class SoleStoredPackTests: XCTestCase {
    func testOnlyOnePackHoldingTheWantsWholeHistoryIsReused() throws {
        let tmp = try TemporaryDirectory()
        let work = tmp.sub("work"), bare = tmp.sub("served.git")
        try git("init", "-q", "-b", "main", work)
        for (name, text) in [("a.txt", "first\n"), ("sub/b.txt", "second\n")] {
            try FileManager.default.createDirectory(atPath: work + "/sub", withIntermediateDirectories: true)
            try Data(text.utf8).write(to: URL(fileURLWithPath: work + "/" + name))
            try git("add", "-A", in: work)
            try git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", name, in: work)
        }
        try git("clone", "-q", "--bare", "--no-local", work, bare)
        try git("repack", "-a", "-d", "-q", in: bare)
        let tip = try XCTUnwrap(ObjectID(hex: try git("rev-parse", "main", in: bare)))
        let tree = try XCTUnwrap(ObjectID(hex: try git("rev-parse", "main^{tree}", in: bare)))
        let packFolder = bare + "/objects/pack"
        let stored = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: packFolder).first { $0.hasSuffix(".pack") })

        func reused(_ wants: [ObjectID]) throws -> Data? {
            guard let handle = try ServedRepository.open(path: bare).soleStoredPack(reaching: wants) else { return nil }
            defer { try? handle.close() }
            return try handle.readToEnd()
        }
        XCTAssertEqual(try reused([tip]), FileManager.default.contents(atPath: packFolder + "/" + stored), "the pack, whole, from its start")
        XCTAssertNil(try reused([tree]), "a want that is not a commit")

        // A loose object beside the pack: the repository is not the pack alone.
        let loose = String(decoding: try gitData(["hash-object", "-w", "--stdin"], in: bare, input: Data("loose\n".utf8)), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertNil(try reused([tip]))
        try FileManager.default.removeItem(atPath: bare + "/objects/" + String(loose.prefix(2)) + "/" + String(loose.dropFirst(2)))
        XCTAssertNotNil(try reused([tip]))

        // One pack of the last commit's objects only (its parent missing): the walk fails.
        let fullPack = packFolder + "/" + stored
        let partial = try gitData(["pack-objects", "-q", bare + "/partial"], in: bare,
                                  input: Data((try git("rev-list", "--objects", "main^..main", in: bare) + "\n").utf8))
        let partialName = String(decoding: partial, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        try FileManager.default.moveItem(atPath: fullPack, toPath: tmp.sub("full.pack"))
        try FileManager.default.moveItem(atPath: String(fullPack.dropLast(5)) + ".idx", toPath: tmp.sub("full.idx"))
        for suffix in [".pack", ".idx"] {
            try FileManager.default.moveItem(atPath: bare + "/partial-\(partialName)" + suffix,
                                             toPath: packFolder + "/pack-\(partialName)" + suffix)
        }
        XCTAssertNil(try reused([tip]), "the parent commit is not in the pack")

        // Two packs, each needed: not one pack.
        try FileManager.default.moveItem(atPath: tmp.sub("full.pack"), toPath: fullPack)
        try FileManager.default.moveItem(atPath: tmp.sub("full.idx"), toPath: String(fullPack.dropLast(5)) + ".idx")
        XCTAssertNil(try reused([tip]))
        // A pack without its index (retired, or being renamed in) is not part of the repository.
        unlink(packFolder + "/pack-\(partialName).idx")
        XCTAssertNotNil(try reused([tip]))
    }

    /// A served repository's pack builder reads `pack.windowMemory` of 1 MiB (a large blob tried
    /// against one neighbour, not ten), from memory: the repository's config file is untouched.
    func testThePackBuilderOfAServedRepositoryHasASmallDeltaWindowInMemoryOnly() throws {
        let tmp = try TemporaryDirectory()
        let bare = tmp.sub("served.git")
        try git("init", "-q", "--bare", bare)
        let config = FileManager.default.contents(atPath: bare + "/config")
        XCTAssertEqual(try ServedRepository.open(path: bare).packWindowMemory, 1 << 20)
        XCTAssertEqual(FileManager.default.contents(atPath: bare + "/config"), config)
        XCTAssertThrowsError(try git("config", "pack.windowMemory", in: bare), "git sees no such setting")
        XCTAssertNil(try GitRepository.open(path: bare).config.value("pack.windowMemory"), "nor does any other handle")
    }
}
