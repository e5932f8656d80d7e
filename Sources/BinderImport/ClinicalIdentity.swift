import BinderFormat

/// What makes two records the same clinical item, whatever document or entry ids their sources
/// gave them (portals make new ones at every download): the same folder, then a shared code
/// where both are coded in a common system (else the same normalised name), the same day where
/// the day tells items apart (a lab panel, a shot, a visit) and the same dose where both give
/// one (metoprolol tartrate 25 mg is not 50 mg).
public struct ClinicalIdentity: Sendable, Equatable {
    public let folder: String
    public let codes: [ClinicalCode]
    public let day: String?
    public let title: String
    public let distinguishing: String?
    // Derived once (compared for every pair): the top folder, lowercased; the codes that name
    // the item as `system|code` (a lab panel: its own code, the first, not its rows'); their
    // systems; the normalised name and distinguishing text.
    let top: String
    let keys: Set<String>
    let systems: Set<String>
    let name: String
    let distinguishingName: String?
    /// A file's content hash (`SourceFiles.contentHashSystem`), among any of its codes.
    let contentHash: String?

    /// Folders whose items happen on a day: the same code on another day is another item.
    static let datedFolders: Set<String> = ["labs", "vitals", "immunizations", "procedures", "visits", "documents"]

    public init(folder: String, codes: [ClinicalCode], day: String?, title: String, distinguishing: String?) {
        self.folder = folder
        self.codes = codes
        self.day = day
        self.title = title
        self.distinguishing = distinguishing
        top = Self.topFolder(folder)
        // Two panels of one day share rows (glucose in a BMP and a CMP): a panel is its own code.
        let naming = top == "labs" ? Array(codes.prefix(1)) : codes
        keys = Set(naming.map { $0.system + "|" + $0.code })
        systems = Set(naming.map(\.system))
        name = Self.normalised(title)
        distinguishingName = distinguishing.map(Self.normalised).flatMap { $0.isEmpty ? nil : $0 }
        contentHash = codes.first { $0.system == SourceFiles.contentHashSystem }?.code
    }

    public func isSameItem(as other: ClinicalIdentity) -> Bool {
        // A file is the same file by its content alone, in any folder, on any day.
        if let mine = contentHash, let theirs = other.contentHash { return mine == theirs }
        guard top == other.top else { return false }
        if Self.datedFolders.contains(top), day != other.day { return false }
        if let mine = distinguishingName, let theirs = other.distinguishingName, mine != theirs { return false }
        if !systems.isDisjoint(with: other.systems) { return !keys.isDisjoint(with: other.keys) }
        return !name.isEmpty && name == other.name
    }

    public static func == (lhs: ClinicalIdentity, rhs: ClinicalIdentity) -> Bool {
        lhs.folder == rhs.folder && lhs.codes == rhs.codes && lhs.day == rhs.day && lhs.title == rhs.title && lhs.distinguishing == rhs.distinguishing
    }

    /// Lowercase letters and digits, one space between words.
    static func normalised(_ text: String) -> String {
        text.lowercased().split { !($0.isLetter || $0.isNumber) }.joined(separator: " ")
    }

    static func topFolder(_ path: String) -> String { String(path.split(separator: "/").first ?? "").lowercased() }

    /// The identity of a record already in the binder, from its folder, front matter and title.
    init(folder: String, document: MedicalDocument) {
        self.init(folder: folder, codes: (document.metadata["codes"]?.arrayValue ?? []).compactMap(ClinicalCode.init(json:)),
                  day: document.created.map { String($0.prefix(10)) }, title: Self.heading(document.value),
                  distinguishing: document.metadata["dose"]?.stringValue ?? document.metadata["memberId"]?.stringValue)
    }

    /// The first markdown heading of `value` (after any front matter), else its first line.
    static func heading(_ value: String) -> String {
        let lines = value.split(separator: "\n", omittingEmptySubsequences: true).prefix(64)
        if let heading = lines.first(where: { $0.hasPrefix("# ") }) { return String(heading.dropFirst(2)) }
        return lines.first.map(String.init) ?? ""
    }
}

/// Identities by what can make two the same (each naming code, the name within a top folder),
/// so that matching an item looks at its few candidates, not at every record: the first (lowest
/// index) identity that is the same item, as a scan from the start would find.
struct IdentityIndex {
    private var identities: [Int: ClinicalIdentity] = [:]
    private var candidates: [String: [Int]] = [:]

    mutating func insert(_ identity: ClinicalIdentity, at index: Int) {
        identities[index] = identity
        for key in Self.lookupKeys(identity) { candidates[key, default: []].append(index) }
    }

    func first(sameAs identity: ClinicalIdentity) -> Int? {
        var found: Int?
        for key in Self.lookupKeys(identity) {
            for index in candidates[key] ?? [] where found.map({ index < $0 }) ?? true {
                if identities[index]?.isSameItem(as: identity) == true { found = index }
            }
        }
        return found
    }

    /// Two same items share a naming code, or (no common system) a name, in one top folder
    /// (and on one day where the day tells items apart: a panel repeated every month).
    private static func lookupKeys(_ identity: ClinicalIdentity) -> [String] {
        if let hash = identity.contentHash { return ["\u{3}" + hash] }
        let scope = identity.top + "\u{0}" + (ClinicalIdentity.datedFolders.contains(identity.top) ? identity.day ?? "" : "")
        return identity.keys.map { scope + "\u{1}" + $0 } + (identity.name.isEmpty ? [] : [scope + "\u{2}" + identity.name])
    }
}
