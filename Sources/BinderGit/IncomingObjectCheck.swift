/// Why an object a client pushed is refused: what `git fsck --strict` (git's
/// `receive.fsckObjects`) reports for it, by the name git gives the problem.
public struct IncomingObjectRefusal: Error, Equatable, CustomStringConvertible {
    public enum Problem: String, Sendable, Equatable {
        /// The object does not parse as its type (libgit2's parser, or a tree's entry framing).
        case unparsable = "badObject"
        case emptyName
        /// A tree entry name holding a '/'.
        case fullPathname
        case hasDot
        case hasDotdot
        /// `.git` in any case, or a name Windows or macOS would read as `.git` (`git~1`, `.git.`).
        case hasDotgit
        case badFilemode
        case zeroPaddedFilemode
        case treeNotSorted
        case duplicateEntries
        case nullSha1
    }

    /// The object's id (40 hex).
    public let object: String
    public let problem: Problem

    public init(object: String, problem: Problem) {
        self.object = object
        self.problem = problem
    }

    /// As git's fsck words it: `object <id>: <problem>`.
    public var description: String { "object \(object): \(problem.rawValue)" }
}

/// git's fsck rules for one tree's raw bytes (`fsck_tree` in git, with `--strict`, where its
/// warnings are errors). Each entry is `<octal mode> <name>\0<20-byte id>`; entries sorted as
/// git sorts them (a tree's name compared as if it ended in '/'), no name twice.
public enum TreeEntryRules {
    /// The modes git writes (100664 is what very old git wrote: accepted, as fsck accepts it).
    static let modes: Set<String> = ["100644", "100755", "100664", "120000", "40000", "160000"]

    /// The first problem of the tree `bytes`, nil when it has none.
    public static func problem(in bytes: [UInt8]) -> IncomingObjectRefusal.Problem? {
        var offset = 0
        var previous: (name: ArraySlice<UInt8>, isTree: Bool)?
        var names = Set<ArraySlice<UInt8>>()
        while offset < bytes.count {
            guard let space = bytes[offset...].firstIndex(of: UInt8(ascii: " ")),
                  let nul = bytes[space...].firstIndex(of: 0), nul + 21 <= bytes.count else { return .unparsable }
            let modeBytes = bytes[offset..<space]
            let name = bytes[(space + 1)..<nul]
            let id = bytes[(nul + 1)..<(nul + 21)]
            offset = nul + 21
            guard !modeBytes.isEmpty, modeBytes.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "7")).contains($0) }) else {
                return .unparsable
            }
            if modeBytes.first == UInt8(ascii: "0") { return .zeroPaddedFilemode }
            let mode = String(decoding: modeBytes, as: UTF8.self)
            guard modes.contains(mode) else { return .badFilemode }
            if let problem = nameProblem(name) { return problem }
            if id.allSatisfy({ $0 == 0 }) { return .nullSha1 }
            let isTree = mode == "40000"
            guard names.insert(name).inserted else { return .duplicateEntries }
            if let previous, compare(previous.name, previous.isTree, name, isTree) > 0 { return .treeNotSorted }
            previous = (name, isTree)
        }
        return nil
    }

    /// What is wrong with one entry's name, nil when nothing.
    static func nameProblem(_ name: ArraySlice<UInt8>) -> IncomingObjectRefusal.Problem? {
        if name.isEmpty { return .emptyName }
        if name.contains(UInt8(ascii: "/")) { return .fullPathname }
        if name.elementsEqual(".".utf8) { return .hasDot }
        if name.elementsEqual("..".utf8) { return .hasDotdot }
        let lower = name.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 | 0x20 : $0 }
        // NTFS drops trailing dots and spaces; its short name of `.git` is `git~1`.
        var trimmed = lower[...]
        while let last = trimmed.last, last == UInt8(ascii: ".") || last == UInt8(ascii: " ") { trimmed = trimmed.dropLast() }
        if trimmed.elementsEqual(".git".utf8) || lower.elementsEqual("git~1".utf8) { return .hasDotgit }
        return nil
    }

    /// git's `base_name_compare`: bytes, a tree's name going on with '/'.
    static func compare(_ a: ArraySlice<UInt8>, _ aIsTree: Bool, _ b: ArraySlice<UInt8>, _ bIsTree: Bool) -> Int {
        for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
        let endA: UInt8? = a.count > b.count ? a[a.startIndex + b.count] : (aIsTree ? UInt8(ascii: "/") : nil)
        let endB: UInt8? = b.count > a.count ? b[b.startIndex + a.count] : (bIsTree ? UInt8(ascii: "/") : nil)
        switch (endA, endB) {
        case (nil, nil): return 0
        case (nil, _): return -1
        case (_, nil): return 1
        case let (x?, y?): return x == y ? 0 : (x < y ? -1 : 1)
        }
    }
}
