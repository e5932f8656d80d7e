@testable import BinderServer
import Foundation
import Testing

/// `StoredRepository.updateRef` on the folder store: a compare-and-swap, atomic against
/// every other writer; bad names and ids refused before git sees them.
@Suite struct RefCompareAndSwapTests {
    @Test func aRefMovesOnlyFromWhereItIs() async throws {
        let server = try TestServer()
        defer { try? FileManager.default.removeItem(atPath: server.folder) }
        let tips = try await server.makeRepository("cas", owner: "owner", commits: 2)
        let repository = try #require(try await server.storage.repositories.repository("cas"))
        #expect(try await repository.ref("refs/heads/main") == tips[1])
        #expect(try await repository.ref("refs/heads/absent") == nil)

        await #expect(throws: StorageError.refConflict(ref: "refs/heads/main", expected: tips[0], found: tips[1])) {
            try await repository.updateRef("refs/heads/main", from: tips[0], to: tips[0])
        }
        await #expect(throws: StorageError.refConflict(ref: "refs/heads/main", expected: nil, found: tips[1])) {
            try await repository.updateRef("refs/heads/main", from: nil, to: tips[0])
        }
        try await repository.updateRef("refs/heads/main", from: tips[1], to: tips[0])
        #expect(try await repository.ref("refs/heads/main") == tips[0])
        try await repository.updateRef("refs/heads/side", from: nil, to: tips[1])
        #expect(try await repository.ref("refs/heads/side") == tips[1])
    }

    @Test func racingCreationsOfOneRefHaveOneWinner() async throws {
        let server = try TestServer()
        defer { try? FileManager.default.removeItem(atPath: server.folder) }
        let tips = try await server.makeRepository("race", owner: "owner", commits: 2)
        let repository = try #require(try await server.storage.repositories.repository("race"))
        let outcomes = await withTaskGroup(of: StorageError?.self) { group in
            for n in 0..<8 {
                group.addTask {
                    do { try await repository.updateRef("refs/heads/race", from: nil, to: tips[n % 2]); return nil } catch {
                        return error as? StorageError
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == nil }.count == 1)
        let winner = try #require(try await repository.ref("refs/heads/race"))
        #expect(outcomes.compactMap { $0 } == Array(repeating: .refConflict(ref: "refs/heads/race", expected: nil, found: winner),
                                                     count: 7))
    }

    @Test(arguments: ["HEAD", "main", "refs/heads/../main", "refs/heads/a.lock", "refs/heads/.hidden", "refs/heads/",
                      "refs/heads/a b", "refs/heads/a~1", "refs//main", "refs/heads/a:b"])
    func aBadRefNameIsRefused(name: String) async throws {
        let server = try TestServer()
        defer { try? FileManager.default.removeItem(atPath: server.folder) }
        let tips = try await server.makeRepository("names", owner: "owner")
        let repository = try #require(try await server.storage.repositories.repository("names"))
        await #expect(throws: StorageError.badRefUpdate(ref: name)) {
            try await repository.updateRef(name, from: nil, to: tips[0])
        }
    }

    @Test func anObjectThatIsNotStoredIsRefused() async throws {
        let server = try TestServer()
        defer { try? FileManager.default.removeItem(atPath: server.folder) }
        try await server.makeRepository("ghost", owner: "owner")
        let repository = try #require(try await server.storage.repositories.repository("ghost"))
        await #expect {
            try await repository.updateRef("refs/heads/ghost", from: nil, to: String(repeating: "ab", count: 20))
        } throws: { error in
            guard case .backend = error as? StorageError else { return false }
            return true
        }
        #expect(try await repository.ref("refs/heads/ghost") == nil)
        await #expect(throws: StorageError.badRefUpdate(ref: "refs/heads/x")) {
            try await repository.updateRef("refs/heads/x", from: nil, to: "not-hex")
        }
    }
}
