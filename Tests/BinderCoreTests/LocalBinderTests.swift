import BinderCore
import BinderGit
import XCTest

/// A binder on this machine as the commands hold it (`LocalBinder`): made bare, opened at its
/// own path or at a work tree, and anything else refused rather than opened.
final class LocalBinderTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("binder-local-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    func testMadeBareAndOpenedAgainAtItsPath() throws {
        let made = try LocalBinder.create(path: directory + "/made")
        XCTAssertTrue(made.repository.isBare)
        XCTAssertEqual(made.path, directory + "/made")
        XCTAssertEqual(made.gitDirectory, directory + "/made")
        let opened = try LocalBinder.open(path: directory + "/made")
        XCTAssertEqual(opened.gitDirectory, made.gitDirectory)
        XCTAssertEqual(opened.path, made.path)
    }

    func testAWorkTreeIsOpenedThroughItsGitFolder() throws {
        _ = try GitRepository.create(path: directory + "/tree", bare: false)
        let opened = try LocalBinder.open(path: directory + "/tree")
        XCTAssertEqual(opened.path, directory + "/tree")
        XCTAssertEqual(opened.gitDirectory, directory + "/tree/.git")
    }

    func testWhatIsNotARepositoryIsRefused() throws {
        try FileManager.default.createDirectory(atPath: directory + "/empty", withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: directory + "/file", contents: Data("not a binder".utf8)))
        for path in [directory + "/empty", directory + "/file", directory + "/missing"] {
            XCTAssertThrowsError(try LocalBinder.open(path: path), path)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/missing"), "open makes nothing")
    }
}
