/// A binder's paths (git's and the view's alike) are bytes separated by the byte `/`, and are
/// cut there, as git and the kernel cut them.
///
/// Swift's `Character`-wise operations on `String` do not: `lastIndex(of: "/")`,
/// `split(separator: "/")` and `hasPrefix(folder + "/")` see a name beginning with a combining
/// mark (U+0301) as part of the `/` before it, one `Character`. So `a/\u{301}x` had no folder,
/// and renaming folder `a` left such a subfolder behind to be deleted with it. Every cut of a
/// path goes through here (`PathBytesTests` holds the cases).
public enum PathBytes {
    static let slash = UInt8(ascii: "/")

    /// ("a/b", "c") for "a/b/c"; ("", "c") for "c".
    public static func split(_ path: String) -> (parent: String, name: String) {
        let utf8 = path.utf8
        guard let cut = utf8.lastIndex(of: slash) else { return ("", path) }
        return (String(decoding: utf8[..<cut], as: UTF8.self), String(decoding: utf8[utf8.index(after: cut)...], as: UTF8.self))
    }

    /// The names of `path` in order, empty ones included ("a//b" has three; "" has one).
    public static func components(_ path: String) -> [String] {
        path.utf8.split(separator: slash, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The first name of `path`, and whether more follow.
    public static func first(_ path: some StringProtocol) -> (name: String, isLast: Bool) {
        let utf8 = path.utf8
        guard let cut = utf8.firstIndex(of: slash) else { return (String(decoding: utf8, as: UTF8.self), true) }
        return (String(decoding: utf8[..<cut], as: UTF8.self), false)
    }

    /// Whether `path` lies inside folder `folder` (below it: `folder` and a `/` begin it).
    /// Nothing lies inside "" by this rule; callers that mean the root say so.
    public static func isInside(_ path: String, folder: String) -> Bool {
        let utf8 = path.utf8, prefix = folder.utf8
        guard utf8.count > prefix.count, utf8.starts(with: prefix) else { return false }
        return utf8[utf8.index(utf8.startIndex, offsetBy: prefix.count)] == slash
    }

    /// `path` without the folder `folder` it lies inside, and without the `/` after it;
    /// nil when it does not lie inside it.
    public static func below(_ path: String, folder: String) -> String? {
        guard isInside(path, folder: folder) else { return nil }
        return String(decoding: path.utf8.dropFirst(folder.utf8.count + 1), as: UTF8.self)
    }

    /// Every folder above `path`, nearest first, "" included: ["a/b", "a", ""] for "a/b/c".
    public static func ancestors(of path: String) -> [String] {
        var out: [String] = []
        var current = path
        while !current.isEmpty {
            current = split(current).parent
            out.append(current)
        }
        return out
    }
}
