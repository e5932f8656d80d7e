import BinderCrypto
import BinderGit

/// The plaintext of the listing index (see `ListingIndex`): the `DocumentPart`s of git folders,
/// by folder path and file name, in a small binary form. Decoding takes bytes that come from
/// disk: every length and count is checked against what is left, every value against its
/// range, and anything wrong throws `ListingIndexError` (never a trap).
enum ListingIndexCodec {
    /// Document parts by git folder path, then by file name (as `ListingCache` keeps them).
    typealias Parts = [String: [String: DocumentPart]]

    /// The plaintext for `parts`: folders in path order, as many as fit in `limit` bytes.
    static func encode(_ parts: Parts, limit: Int) -> [UInt8] {
        var out: [UInt8] = []
        encode(parts, limit: limit, appendingTo: &out, roomAfter: 0)
        return out
    }

    /// Appends the plaintext for `parts` to `out`, which is made room for once: the plaintext
    /// and `roomAfter` bytes more. Each folder is measured before anything is written, so the
    /// buffer is never grown, copied or concatenated (for 100,000 records, growing it and
    /// joining the pieces held 75 MB at once for a 25 MB index, after every save).
    static func encode(_ parts: Parts, limit: Int, appendingTo out: inout [UInt8], roomAfter: Int) {
        // Sorted: a load hands folders out in this order (`ListingIndexLoad.parts(of:)`). Any
        // fixed order does for names (a load reads them into a dictionary); bytewise is several
        // times faster than `String`'s Unicode order (100,000 names in a folder).
        var folders: [(path: String, names: [String])] = []
        var size = 0
        for folder in parts.keys.sorted() {
            guard let folderParts = parts[folder] else { continue }
            let names = folderParts.keys.sorted(by: ViewPath.precedesBytewise)
            var measure = IndexWriter(measuring: true)
            measure.folder(folder, names: names, parts: folderParts)
            // Over the limit: the folders that fit are kept (the others are listed by decrypting).
            if size + measure.measured + 10 > limit { break }
            size += measure.measured
            folders.append((folder, names))
        }
        var header = IndexWriter(measuring: false)
        header.count(folders.count)
        var writer = IndexWriter(measuring: false)
        swap(&writer.bytes, &out)  // `out` moves in, unshared: appending copies nothing
        writer.bytes.reserveCapacity(writer.bytes.count + header.bytes.count + size + roomAfter)
        writer.bytes.append(contentsOf: header.bytes)
        for folder in folders {
            if let folderParts = parts[folder.path] { writer.folder(folder.path, names: folder.names, parts: folderParts) }
        }
        swap(&writer.bytes, &out)
    }

    static func decode(_ bytes: [UInt8]) throws(ListingIndexError) -> Parts {
        try bytes.withUnsafeBytes { buffer in Result { () throws(ListingIndexError) in try decode(buffer) } }.get()
    }

    /// `eachFolder` is told of each folder as soon as it is decoded, in the file's order (sorted
    /// by path as `encode` writes them: the root, "", first), before the rest of the file is
    /// checked.
    static func decode(_ bytes: UnsafeRawBufferPointer,
                       eachFolder: ((String, [String: DocumentPart]) -> Void)? = nil) throws(ListingIndexError) -> Parts {
        var reader = IndexReader(bytes)
        var parts: Parts = [:]
        // Counts are checked against the bytes left (each entry takes at least one), so
        // reserving them cannot ask for more than the file's size.
        let folders = try reader.count()
        parts.reserveCapacity(folders)
        for _ in 0..<folders {
            let folder = try reader.string()
            let count = try reader.count()
            var folderParts = [String: DocumentPart](minimumCapacity: count)
            for _ in 0..<count {
                let name = try reader.string()
                folderParts[name] = try reader.part(of: folder, keptAs: name)
            }
            parts[folder] = folderParts
            eachFolder?(folder, folderParts)
        }
        guard reader.atEnd else { throw .malformed("bytes after the last folder") }
        return parts
    }
}

/// Why an index file was not used (it is then rebuilt; never shown to a user as an error).
enum ListingIndexError: Error, Equatable, CustomStringConvertible {
    case missing
    case tooLarge(Int)
    case otherVersion
    case unreadable(String)
    case sealed(String)
    case malformed(String)

    var description: String {
        switch self {
        case .missing: "no listing index"
        case .tooLarge(let n): "listing index of \(n) bytes is over its limit"
        case .otherVersion: "listing index of another format version"
        case .unreadable(let why): "listing index unreadable: \(why)"
        case .sealed(let why): "listing index: \(why)"
        case .malformed(let field): "listing index malformed: \(field)"
        }
    }
}

/// Writes the plaintext, or only counts its bytes (`measuring`): every value goes through
/// `byte`, `varint`, `string` or `id`, so the two agree.
private struct IndexWriter {
    let measuring: Bool
    var bytes: [UInt8] = []
    /// Bytes written or counted.
    private(set) var measured = 0

    init(measuring: Bool) { self.measuring = measuring }

    mutating func byte(_ value: UInt8) {
        measured += 1
        if !measuring { bytes.append(value) }
    }

    /// LEB128, unsigned.
    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            byte(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        byte(UInt8(v))
    }

    /// A git folder: its path, then its documents' parts by name (`names`, in that order).
    mutating func folder(_ path: String, names: [String], parts: [String: DocumentPart]) {
        string(path)
        count(names.count)
        for name in names {
            string(name)
            if let part = parts[name] { self.part(part) }
        }
    }

    mutating func count(_ n: Int) { varint(UInt64(max(n, 0))) }
    mutating func int(_ n: Int64) { varint(UInt64(bitPattern: n)) }

    mutating func string(_ text: String) {
        count(text.utf8.count)
        measured += text.utf8.count
        if !measuring { bytes.append(contentsOf: text.utf8) }
    }

    mutating func optionalString(_ text: String?) {
        byte(text == nil ? 0 : 1)
        if let text { string(text) }
    }

    mutating func id(_ id: ObjectID) {
        measured += ObjectID.byteCount
        if !measuring { bytes.append(contentsOf: id.bytes) }
    }

    mutating func time(_ t: Timestamp) {
        int(t.seconds)
        varint(UInt64(max(t.nanoseconds, 0)))
    }

    mutating func indexPath(_ path: [Int]) {
        count(path.count)
        for i in path { count(i) }
    }

    mutating func source(_ source: Node.Source) {
        switch source {
        case .directory: byte(0)
        case .document(let blob): byte(1); id(blob)
        case .child(let blob, let path): byte(2); id(blob); indexPath(path)
        case .inlineAttachment(let blob, let path): byte(3); id(blob); indexPath(path)
        case .sidecar(let blob): byte(4); id(blob)
        case .raw(let blob): byte(5); id(blob)
        }
    }

    mutating func node(_ node: Node) {
        source(node.source)
        count(node.size)
        time(node.modified)
        string(node.gitPath)
        switch node.owner {
        case .none: byte(0)
        case .some(.document(let path)): byte(1); string(path)
        case .some(.child(let path, let index)): byte(2); string(path); indexPath(index)
        }
    }

    mutating func listing(_ listing: Listing) {
        count(listing.nodes.count)
        for (name, node) in listing.sortedEntries {
            string(name)
            self.node(node)
        }
    }

    mutating func part(_ part: DocumentPart) {
        id(part.blob)
        string(part.name)
        node(part.node)
        byte(part.children == nil ? 0 : 1)
        if let children = part.children {
            node(children.node)
            count(children.listings.count)
            for path in children.listings.keys.sorted() {
                string(path)
                listing(children.listings[path] ?? Listing())
            }
        }
        count(part.consumedSidecars.count)
        for name in part.consumedSidecars.sorted() { string(name) }
        count(part.sidecarLookups.count)
        for name in part.sidecarLookups.keys.sorted() {
            string(name)
            if case .some(.some(let found)) = part.sidecarLookups[name] { byte(1); id(found) } else { byte(0) }
        }
        byte(part.usesCommitTime ? 1 : 0)
        time(part.commitTime)
        byte(part.facts == nil ? 0 : 1)
        if let facts = part.facts {
            optionalString(facts.createdDay)
            byte(facts.createdTime == nil ? 0 : 1)
            if let time = facts.createdTime { self.time(time) }
            optionalString(facts.type)
            string(facts.title)
            count(facts.tags.count)
            for tag in facts.tags { string(tag) }
        }
    }
}

/// Reads what `IndexWriter` wrote, checking everything. A count is at most the bytes left
/// (every element takes at least one), so no count can make it allocate or loop beyond the
/// input's size.
private struct IndexReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var atEnd: Bool { offset == bytes.count }

    mutating func byte() throws(ListingIndexError) -> UInt8 {
        guard offset < bytes.count else { throw .malformed("ends early") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func flag(_ field: String) throws(ListingIndexError) -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        default: throw .malformed(field)
        }
    }

    mutating func varint() throws(ListingIndexError) -> UInt64 {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 7) {
            let b = try byte()
            if shift == 63 && b > 1 { throw .malformed("number too large") }
            value |= UInt64(b & 0x7F) << UInt64(shift)
            if b & 0x80 == 0 { return value }
        }
        throw .malformed("number too long")
    }

    /// A count or size: at most the bytes left when it counts elements.
    mutating func count(elements: Bool = true) throws(ListingIndexError) -> Int {
        let value = try varint()
        guard value <= (elements ? UInt64(Int32.max) : 1 << 48) else { throw .malformed("count or size out of range") }
        if elements && Int(value) > bytes.count - offset { throw .malformed("count larger than the file") }
        return Int(value)
    }

    mutating func int() throws(ListingIndexError) -> Int64 { Int64(bitPattern: try varint()) }

    mutating func string() throws(ListingIndexError) -> String {
        let n = try count()
        let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + n)])
        offset += n
        // Names and paths are nearly always ASCII, which is valid UTF-8 as it is: decoding it
        // skips the validation (a fifth of a large index's load; docs/BENCHMARKS.md).
        if slice.allSatisfy({ $0 < 0x80 }) { return String(decoding: slice, as: UTF8.self) }
        guard let text = String(validating: slice, as: UTF8.self) else { throw .malformed("text not UTF-8") }
        return text
    }

    mutating func optionalString() throws(ListingIndexError) -> String? {
        try flag("optional text") ? try string() : nil
    }

    mutating func id() throws(ListingIndexError) -> ObjectID {
        guard bytes.count - offset >= ObjectID.byteCount,
              let id = ObjectID(bytes: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + ObjectID.byteCount)])) else {
            throw .malformed("object id")
        }
        offset += ObjectID.byteCount
        return id
    }

    mutating func time() throws(ListingIndexError) -> Timestamp {
        let seconds = try int()
        let nanoseconds = try varint()
        guard nanoseconds < 1_000_000_000 else { throw .malformed("nanoseconds") }
        return Timestamp(seconds: seconds, nanoseconds: Int32(nanoseconds))
    }

    mutating func indexPath() throws(ListingIndexError) -> [Int] {
        var path: [Int] = []
        for _ in 0..<(try count()) { path.append(try count(elements: false)) }
        return path
    }

    mutating func source() throws(ListingIndexError) -> Node.Source {
        switch try byte() {
        case 0: return .directory
        case 1: return .document(blob: try id())
        case 2: return .child(blob: try id(), indexPath: try indexPath())
        case 3: return .inlineAttachment(blob: try id(), indexPath: try indexPath())
        case 4: return .sidecar(blob: try id())
        case 5: return .raw(blob: try id())
        default: throw .malformed("node source")
        }
    }

    /// A node; one stored at `place` (a document's, in its folder's parts) is given the
    /// folder's and the name's strings rather than a path of its own (see `Node.gitPath`).
    mutating func node(storedAt place: (folder: String, name: String)? = nil) throws(ListingIndexError) -> Node {
        let source = try self.source()
        let size = try count(elements: false)
        let modified = try time()
        let sharesPlace = try place.map { (place) throws(ListingIndexError) in try skipPath(ifItJoins: place) } ?? false
        let gitPath = sharesPlace ? "" : try string()
        let owner: Node.Owner?
        switch try byte() {
        case 0: owner = nil
        case 1: owner = .document(path: try string())
        case 2: owner = .child(documentPath: try string(), indexPath: try indexPath())
        default: throw .malformed("node owner")
        }
        if sharesPlace, let place {
            return Node(source: source, size: size, modified: modified, gitFolder: place.folder, gitName: place.name, owner: owner)
        }
        return Node(source: source, size: size, modified: modified, gitPath: gitPath, owner: owner)
    }

    /// Reads past the string next in the input if it is `place.folder/place.name` (or the name
    /// alone at the root), and says whether it was; otherwise leaves it to be read.
    private mutating func skipPath(ifItJoins place: (folder: String, name: String)) throws(ListingIndexError) -> Bool {
        let (folder, name) = (place.folder.utf8, place.name.utf8)
        let start = offset
        let n = try count()
        guard n == (folder.isEmpty ? name.count : folder.count + 1 + name.count) else { offset = start; return false }
        let bytes = UnsafeRawBufferPointer(rebasing: self.bytes[offset..<(offset + n)])
        let joins = folder.isEmpty ? bytes.elementsEqual(name)
            : bytes.prefix(folder.count).elementsEqual(folder) && bytes[folder.count] == UInt8(ascii: "/") && bytes.suffix(name.count).elementsEqual(name)
        guard joins else { offset = start; return false }
        offset += n
        return true
    }

    mutating func listing() throws(ListingIndexError) -> Listing {
        var listing = Listing()
        for _ in 0..<(try count()) {
            let name = try string()
            listing.nodes[name] = try node()
        }
        return listing
    }

    mutating func children() throws(ListingIndexError) -> DocumentPart.Children? {
        guard try flag("children") else { return nil }
        let node = try self.node()
        var listings: [String: Listing] = [:]
        for _ in 0..<(try count()) {
            let path = try string()
            listings[path] = try listing()
        }
        return DocumentPart.Children(node: node, listings: listings)
    }

    mutating func facts() throws(ListingIndexError) -> RecordFacts? {
        guard try flag("facts") else { return nil }
        let day = try optionalString()
        guard day.map(TimelineNames.startsWithDay) ?? true, (day?.utf8.count ?? 10) == 10 else { throw .malformed("created day") }
        let time: Timestamp? = try flag("created time") ? try self.time() : nil
        let type = try optionalString()
        let title = try string()
        var tags: [String] = []
        for _ in 0..<(try count()) { tags.append(try string()) }
        return RecordFacts(createdDay: day, createdTime: time, type: type, title: title, tags: tags)
    }

    /// The part of document `key` of git folder `folder`.
    mutating func part(of folder: String, keptAs key: String) throws(ListingIndexError) -> DocumentPart {
        let blob = try id()
        let name = try string()
        let node = try self.node(storedAt: (folder, key))
        let children = try self.children()
        var consumed = Set<String>()
        for _ in 0..<(try count()) { consumed.insert(try string()) }
        var lookups: [String: ObjectID?] = [:]
        for _ in 0..<(try count()) {
            let name = try string()
            let found: ObjectID? = try flag("sidecar lookup") ? try id() : nil
            lookups[name] = .some(found)
        }
        let usesCommitTime = try flag("uses commit time")
        let commitTime = try time()
        return DocumentPart(blob: blob, name: name, node: node, children: children, consumedSidecars: consumed,
                            sidecarLookups: lookups, usesCommitTime: usesCommitTime, commitTime: commitTime, facts: try facts())
    }
}
