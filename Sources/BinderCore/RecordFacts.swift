import BinderFormat
import BinderGit
import Foundation

/// What the `.binder/` views name and order a record by: its own date, its title, its tags.
/// Worked out when its folder is listed (the document is decrypted then anyway) and kept in
/// memory with the listing, never written anywhere.
struct RecordFacts: Sendable, Equatable {
    /// The day `metadata.created` names as written: `2026-02-09` of
    /// "2026-02-09T10:00:00-05:00", the patient's own day, whatever the offset. Nil when
    /// `created` is absent or does not start with a day. Ten bytes, which a `String` holds
    /// inline: `created` kept whole was an allocation per record (6 MB at 100,000).
    let createdDay: String?
    /// `metadata.created` as a time; nil when absent or not a time.
    let createdTime: Timestamp?
    /// `metadata.type`, for records at the root (which have no category folder).
    let type: String?
    /// The first markdown heading of the body, else the file name without its extension.
    let title: String
    /// `metadata.tags`: the strings among them.
    let tags: [String]

    init(createdDay: String?, createdTime: Timestamp?, type: String?, title: String, tags: [String]) {
        self.createdDay = createdDay
        self.createdTime = createdTime
        self.type = type
        self.title = title
        self.tags = tags
    }

    /// From `metadata.created` as written.
    init(created: String?, type: String? = nil, title: String, tags: [String] = []) {
        let day = created.flatMap { TimelineNames.startsWithDay($0) ? String(decoding: $0.utf8.prefix(10), as: UTF8.self) : nil }
        let time = created.flatMap(Timestamps.parse).map { Timestamp(seconds: $0.seconds, nanoseconds: $0.nanoseconds) }
        self.init(createdDay: day, createdTime: time, type: type, title: title, tags: tags)
    }

    init(_ document: MedicalDocument, fileStem: String) {
        let tags = document.metadata["tags"]?.arrayValue?.compactMap(\.stringValue) ?? []
        self.init(created: document.metadata["created"]?.stringValue, type: document.metadata["type"]?.stringValue,
                  title: Self.firstHeading(document.value) ?? fileStem, tags: tags)
    }

    /// The text of the first ATX heading (`# Title`, up to six `#`, then a space).
    ///
    /// Every listed document passes through here (a folder's first listing, the listing's
    /// update after each save), so the lines are found by scanning bytes, and only a line that
    /// can be a heading (spaces, one to six `#`, a space or tab) is looked at as text, by the
    /// same rules as `firstHeadingByLines`. Splitting the whole body into lines first was most
    /// of a save's listing update. A body holding `\r` takes the line-by-line rules themselves:
    /// there `\r\n` is one character, which is not a line break for them.
    static func firstHeading(_ markdown: String) -> String? {
        var markdown = markdown
        return markdown.withUTF8 { bytes -> String? in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return nil }
            if memchr(base, 0x0D, bytes.count) != nil { return firstHeadingByLines(String(decoding: bytes, as: UTF8.self)) }
            var lineStart = 0
            while lineStart < bytes.count {
                let lineEnd = memchr(base + lineStart, 0x0A, bytes.count - lineStart)
                    .map { UnsafePointer<UInt8>($0.assumingMemoryBound(to: UInt8.self)) - base } ?? bytes.count
                var i = lineStart
                while i < lineEnd, bytes[i] == 0x20 { i += 1 }
                let hashesStart = i
                while i < lineEnd, bytes[i] == 0x23 { i += 1 }
                if (1...6).contains(i - hashesStart), i < lineEnd, bytes[i] == 0x20 || bytes[i] == 0x09,
                   let title = heading(in: String(decoding: UnsafeBufferPointer(rebasing: bytes[lineStart..<lineEnd]), as: UTF8.self)) {
                    return title
                }
                lineStart = lineEnd + 1
            }
            return nil
        }
    }

    /// `firstHeading` by its rules as written: the body split into lines (`Character`s), each
    /// line tried in turn. The byte scan must agree with it (`CorePartsTests.testFirstHeadingTable`).
    static func firstHeadingByLines(_ markdown: String) -> String? {
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: true) {
            if let title = heading(in: line) { return title }
        }
        return nil
    }

    /// The heading's text if `line` is an ATX heading with text, else nil.
    private static func heading(in line: some StringProtocol) -> String? {
        let trimmed = line.drop { $0 == " " }
        let hashes = trimmed.prefix { $0 == "#" }
        guard (1...6).contains(hashes.count) else { return nil }
        let rest = trimmed.dropFirst(hashes.count)
        guard rest.first == " " || rest.first == "\t" else { return nil }
        var text = rest.trimmingCharacters(in: .whitespaces)
        while text.hasSuffix("#") { text.removeLast() }  // closing hashes: `# Title #`
        text = text.trimmingCharacters(in: .whitespaces)
        return text.isEmpty ? nil : text
    }
}

/// A record as the timeline and tag views list it.
struct TimelineRecord: Sendable, Equatable {
    /// Where the record is in the view ("visits/2026-02-09-follow-up.md").
    let viewPath: String
    let facts: RecordFacts
    /// Its mtime in the view: what orders it when it has no `created` of its own.
    let modified: Timestamp

    /// The record's folder at the top of the binder (`visits`), else its type, else "binder".
    var category: String {
        if case let (folder, false) = PathBytes.first(viewPath) { return folder }
        return facts.type.map(TimelineNames.clean).flatMap { $0.isEmpty ? nil : $0 } ?? "binder"
    }

    /// What orders the timeline: `created`, else the mtime.
    var time: Timestamp { facts.createdTime ?? modified }

    /// `YYYY-MM-DD` as `created` writes it (the patient's own day), else the time's UTC day.
    var day: String {
        facts.createdDay ?? TimelineNames.utcDay(time.seconds)
    }
}

/// How the timeline names records: `YYYY-MM-DD category title.ext`, unique, newest first.
/// The rules are rows of `Tests/BinderCoreTests/RecordViewsTests.swift`.
enum TimelineNames {
    /// Room kept for a `-NN` suffix, so that a name made unique still fits 255 bytes.
    static let suffixRoom = 8

    /// The name a record wants (before being made unique): the extension is the record's own
    /// in the view (`.md`, `.pdf`).
    static func wanted(_ record: TimelineRecord) -> String {
        let ext = BinderNaming.splitExtension(ViewPath.split(record.viewPath).name).ext
        var title = clean(record.facts.title)
        if title.isEmpty { title = clean(BinderNaming.splitExtension(ViewPath.split(record.viewPath).name).stem) }
        let name = "\(record.day) \(record.category) \(title)"
        return BinderNaming.fitting(name, maxBytes: BinderNaming.maximumBytes - suffixRoom - ext.utf8.count) + ext
    }

    /// Each record with its unique name, newest first (by `created`, then by view path). Names
    /// are given oldest first, so a newer record with the same wanted name gets the `-2`, and
    /// the names of records already listed do not change when one is added.
    static func assign(_ records: [TimelineRecord]) -> [(name: String, record: TimelineRecord)] {
        let oldestFirst = records.sorted { a, b in
            a.time != b.time ? a.time < b.time : a.viewPath.utf8.lexicographicallyPrecedes(b.viewPath.utf8)
        }
        // Names taken so far, compared as a listing's are (String equality). Sized at once:
        // each growth would hash every name again (100,000 at most in a timeline).
        var taken = Set<String>(minimumCapacity: records.count)
        var named: [(name: String, record: TimelineRecord)] = []
        named.reserveCapacity(records.count)
        for record in oldestFirst {
            let name = BinderNaming.firstFree(wanted(record)) { taken.contains($0) }
            taken.insert(name)
            named.append((name, record))
        }
        return named.reversed()
    }

    /// A title or type fit for a file name: '/' becomes '-', control characters and runs of
    /// white space one space, no leading dot, trimmed.
    ///
    /// Asked of every record each time the timeline is worked out (after each commit shown):
    /// a text it would leave as it is, as most titles are, is returned without a copy, and
    /// only scalars past ASCII are looked up in Unicode's tables (`cleanByScalars` is the
    /// rule as written; `CorePartsTests.testTimelineCleanTable` holds the two to one answer).
    static func clean(_ text: String) -> String {
        isClean(text) ? text : cleanByScalars(text)
    }

    /// Whether `cleanByScalars` returns `text` unchanged: no '/', no control character, no
    /// white space but single ASCII spaces between words, no leading dot.
    static func isClean(_ text: String) -> Bool {
        var afterSpace = true  // a leading space is trimmed: not clean
        var first = true
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value == 0x20 {
                if afterSpace { return false }
                afterSpace = true
            } else if value < 0x80 {
                // ASCII's other white space (tab to carriage return) are control characters.
                if value < 0x20 || value == 0x7F || value == 0x2F || (first && value == 0x2E) { return false }
                afterSpace = false
            } else {
                if scalar.properties.isWhitespace || scalar.properties.generalCategory == .control { return false }
                afterSpace = false
            }
            first = false
        }
        return first || !afterSpace  // empty, or not ending in a space
    }

    /// `clean`'s rule, scalar by scalar.
    static func cleanByScalars(_ text: String) -> String {
        var out = ""
        var space = false
        for scalar in text.unicodeScalars {
            if scalar.properties.isWhitespace || scalar.properties.generalCategory == .control {
                space = !out.isEmpty
                continue
            }
            if space { out += " " }
            space = false
            out.unicodeScalars.append(scalar == "/" ? "-" : scalar)
        }
        while out.hasPrefix(".") { out.removeFirst() }
        return out
    }

    /// Whether `text` starts with `NNNN-NN-NN` in ASCII digits (checked per record of the
    /// timeline: bytes, not a regular expression).
    static func startsWithDay(_ text: String) -> Bool {
        let bytes = text.utf8.prefix(10)
        guard bytes.count == 10 else { return false }
        for (i, byte) in bytes.enumerated() {
            if i == 4 || i == 7 { if byte != UInt8(ascii: "-") { return false } }
            else if !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { return false }
        }
        return true
    }

    static func utcDay(_ seconds: Int64) -> String {
        String(Timestamps.string(seconds: seconds).prefix(10))
    }
}
