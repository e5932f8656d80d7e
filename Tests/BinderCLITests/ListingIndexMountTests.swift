import BinderCrypto
import Foundation
import XCTest

/// The listing index through a real mount: the second mount of a binder lists it without
/// decrypting a record, shows the same names, sizes and times, and reads the same bytes; the
/// index file holds none of the text it describes.
final class ListingIndexMountTests: XCTestCase {
    func testASecondMountListsFromTheIndexWithoutDecrypting() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let mnt = binder.mountpoint
        let listing = "ls -lR --time-style=+%s.%N . && find . -type f -exec stat -c '%s %n' {} + | LC_ALL=C sort"
        let contents = "find . -type f -exec sh -c 'printf \"%s %s\\n\" \"$(wc -c < \"$1\")\" \"$1\"' _ {} \\; | LC_ALL=C sort"
        let first = try shell(listing, in: mnt)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertGreaterThan(try binder.statusValue("listing_decryptions"), 20)
        let sample = try shell("find . -name '*.md' | LC_ALL=C sort | head -n 5 | xargs cat", in: mnt).stdout
        binder.unmount()

        let index = binder.repository + "/.git/binder/listing-index"
        let deadline = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: index) && Date() < deadline { usleep(50_000) }
        let sealed = try XCTUnwrap(FileManager.default.contents(atPath: index), "the unmount wrote the index")
        // No line of what the records say (titles included) is in the file.
        for line in sample.split(separator: "\n") where line.utf8.count >= 12 {
            XCTAssertNil(sealed.range(of: Data(line.prefix(12).utf8)), "plaintext in the index: \(line.prefix(12))")
        }
        XCTAssertEqual(try shell("git -C '\(binder.repository)' fsck --no-progress 2>&1").stdout
            .split(separator: "\n").filter { !$0.hasPrefix("dangling") && !$0.hasPrefix("notice") }, [], "git fsck is clean")
        XCTAssertEqual(try shell("git -C '\(binder.repository)' status --porcelain --ignored").stdout, "", "not in the work tree")

        try binder.mount()
        let second = try shell(listing, in: mnt)
        XCTAssertEqual(second.stdout, first.stdout, "the same names, sizes and times")
        XCTAssertEqual(try binder.statusValue("listing_decryptions"), 0, "listed from the index")
        // Every file reads to exactly its listed size (sha256sum reads to the end).
        let sizes = try shell("find . -type f -exec stat -c '%s %n' {} + | LC_ALL=C sort", in: mnt)
        let read = try shell(contents, in: mnt)
        XCTAssertEqual(read.stdout, sizes.stdout)
    }
}
