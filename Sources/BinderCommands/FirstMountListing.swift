import BinderCore
import Foundation
import Glibc

/// The first mount of a binder, on a terminal. Without a listing index (`ListingIndexFile`)
/// each folder's listing is built from its records the first time it is read (every record's
/// header decrypted: seconds for thousands of records), so the first `ls` or `grep -r` would
/// sit silent. `binder mount` reads every folder through the new mount instead, which builds
/// the listings (and the index later mounts load at once), and says how far it is on a
/// progress line. Ctrl-C ends the reading, not the mount. Off a terminal nothing is read:
/// scripts get the mount back at once, as before.
struct FirstMountListing {
    let mountpoint: String
    let line: ProgressLine

    /// Whether the mount of the binder in `gitDirectory` is its first (no index yet), and shown
    /// on a terminal.
    static func isDue(gitDirectory: String, line: ProgressLine) -> Bool {
        line.isTerminal && !Verbosity.isQuiet && !FileManager.default.fileExists(atPath: ListingIndexFile.path(gitDirectory: gitDirectory))
    }

    /// Reads every folder under the mount point, breadth first, updating the line after each.
    /// Returns the folders and files listed.
    @discardableResult
    func run() -> (folders: Int, files: Int) {
        var pending = [mountpoint]
        var folders = 0, files = 0
        line.update("Reading the binder's listings for its first mount…")
        while !pending.isEmpty {
            let folder = pending.removeFirst()
            guard let directory = opendir(folder) else { continue }
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name == "." || name == ".." || (folder == mountpoint && name == ".binder") { continue }
                if entry.pointee.d_type == UInt8(DT_DIR) { pending.append(folder + "/" + name) } else { files += 1 }
            }
            closedir(directory)
            folders += 1
            line.update("Reading the binder's listings for its first mount: \(folders) folder\(folders == 1 ? "" : "s"), "
                        + "\(files) file\(files == 1 ? "" : "s") (\(pending.count) folder\(pending.count == 1 ? "" : "s") to go)")
        }
        line.finish("Listings ready: \(folders) folder\(folders == 1 ? "" : "s"), \(files) file\(files == 1 ? "" : "s") (later mounts start from the index)")
        return (folders, files)
    }
}
