import BinderFormat

/// What makes two records the same clinical item, whatever document or entry ids their sources
/// gave them (portals make new ones at every download): the same folder, then a shared code
/// where both are coded in a common system (else the same normalised name), the same day where
/// the day tells items apart (a lab panel, a shot, a visit) and the same dose where both give
/// one (metoprolol tartrate 25 mg is not 50 mg).
public struct ClinicalIdentity: Sendable, Equatable {
    public let folder: String
    /// The top folder, lowercased: items match only within it (kept: compared for every pair).
    let top: String
    public var codes: [ClinicalCode]
    public var day: String?
    public var title: String
    public var distinguishing: String?

    /// Folders whose items happen on a day: the same code on another day is another item.
    static let datedFolders: Set<String> = ["labs", "vitals", "immunizations", "procedures", "visits", "documents"]

    public func isSameItem(as other: ClinicalIdentity) -> Bool {
        guard top == other.top else { return false }
        if Self.datedFolders.contains(top), day != other.day { return false }
        if let mine = distinguishing.map(Self.normalised), let theirs = other.distinguishing.map(Self.normalised),
           !mine.isEmpty, !theirs.isEmpty, mine != theirs { return false }
        let shared = Set(codes.map(\.system)).intersection(other.codes.map(\.system))
        if !shared.isEmpty {
            let mine = Set(codes.filter { shared.contains($0.system) }.map { $0.system + "|" + $0.code })
            return !mine.isDisjoint(with: other.codes.map { $0.system + "|" + $0.code })
        }
        let name = Self.normalised(title)
        return !name.isEmpty && name == Self.normalised(other.title)
    }

    /// Lowercase letters and digits, one space between words.
    static func normalised(_ text: String) -> String {
        text.lowercased().split { !($0.isLetter || $0.isNumber) }.joined(separator: " ")
    }

    static func topFolder(_ path: String) -> String { String(path.split(separator: "/").first ?? "").lowercased() }

    /// The identity of a record already in the binder, from its folder, front matter and title.
    init(folder: String, document: MedicalDocument) {
        self.folder = folder
        top = Self.topFolder(folder)
        codes = (document.metadata["codes"]?.arrayValue ?? []).compactMap(ClinicalCode.init(json:))
        day = document.created.map { String($0.prefix(10)) }
        title = Self.heading(document.value)
        distinguishing = document.metadata["dose"]?.stringValue
    }

    public init(folder: String, codes: [ClinicalCode], day: String?, title: String, distinguishing: String?) {
        self.folder = folder
        top = Self.topFolder(folder)
        self.codes = codes
        self.day = day
        self.title = title
        self.distinguishing = distinguishing
    }

    /// The first markdown heading of `value` (after any front matter), else its first line.
    static func heading(_ value: String) -> String {
        let lines = value.split(separator: "\n", omittingEmptySubsequences: true).prefix(64)
        if let heading = lines.first(where: { $0.hasPrefix("# ") }) { return String(heading.dropFirst(2)) }
        return lines.first.map(String.init) ?? ""
    }
}
