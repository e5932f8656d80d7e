import BinderFormat
import Foundation
import ZIPFoundation

/// Apple Health's `export.zip`, read through ZIPFoundation without unpacking it to disk: its
/// `clinical-records/` FHIR files are one source (as the unzipped folder's are, kept once as
/// NDJSON); the samples of `export.xml` (steps, heart rate…: often millions) are counted as
/// it streams by and reported, never made records or kept; `export_cda.xml` is left out. Before
/// anything inflates, every entry's path is checked (an absolute path or a `..` refuses the
/// archive) and the declared sizes are held to `Limits`; while inflating, an entry that yields
/// more than it declared is refused (a zip bomb lies in its headers).
enum AppleHealthExport {
    struct Limits {
        /// Entries in the archive (Apple's exports hold a file per clinical record, route and ECG).
        var entries = 100_000
        /// What the clinical records may inflate to, each and together (`--max-size`).
        var bytes: Int
        /// `export.xml` is streamed to count its samples, never held: its declared size up to this.
        var sampleBytes: UInt64 = 64 << 30
    }

    /// Whether the file at `path` starts as a zip archive (`PK\3\4`).
    static func isZip(path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        return (try? handle.read(upToCount: 4)).flatMap { $0 } == Data([0x50, 0x4B, 0x03, 0x04])
    }

    static func read(path: String, file: String, limits: Limits, importDate: String) throws(ImportError) -> SourceDocument {
        let archive: Archive
        do { archive = try Archive(url: URL(fileURLWithPath: path), accessMode: .read) } catch {
            throw .archiveRefused(file: file, reason: "not a zip archive binder can read")
        }
        var entries: [Entry] = []
        for entry in archive {
            entries.append(entry)
            if entries.count > limits.entries { throw .archiveRefused(file: file, reason: "more than \(limits.entries) entries") }
        }
        for entry in entries where !isContained(entry.path) {
            throw .archiveRefused(file: file, reason: "an entry's path leads out of the archive (absolute, or through '..')")
        }
        let clinical = entries.filter { $0.type == .file && isClinicalRecord($0.path) }
        let samplesEntry = entries.first { $0.type == .file && name(of: $0.path) == "export.xml" }
        guard !clinical.isEmpty || samplesEntry != nil else { throw .notRecognised(file: file) }
        var total: UInt64 = 0
        for entry in clinical {
            total += entry.uncompressedSize
            if entry.uncompressedSize > UInt64(limits.bytes) || total > UInt64(limits.bytes) {
                throw .archiveRefused(file: file, reason: "its clinical records inflate past the import limit of \(limits.bytes) bytes (--max-size raises it)")
            }
        }
        var resources: [JSONObject] = []
        var skipped: [SkippedItem] = []
        for entry in clinical {
            let shown = file + ": " + entry.path
            let bytes = try inflate(entry, of: archive, file: file)
            do { resources += try SourceReader.jsonResources(bytes, file: shown) } catch .notRecognised {
                skipped.append(SkippedItem(file: shown, what: name(of: entry.path), reason: "JSON that is not FHIR"))
            }
        }
        if let samplesEntry {
            guard samplesEntry.uncompressedSize <= limits.sampleBytes else {
                throw .archiveRefused(file: file, reason: "export.xml declares \(samplesEntry.uncompressedSize) bytes, past \(limits.sampleBytes)")
            }
            let samples = try countSamples(samplesEntry, of: archive, file: file)
            skipped.append(SkippedItem(file: file, what: "export.xml", reason: "\(samples) samples (steps, heart rate…) are not imported"))
        }
        if entries.contains(where: { name(of: $0.path) == "export_cda.xml" }) {
            skipped.append(SkippedItem(file: file, what: "export_cda.xml", reason: "the samples again, as CDA: not imported"))
        }
        guard !resources.isEmpty else {
            throw .archiveRefused(file: file, reason: "no clinical records in it (" + (skipped.first?.reason ?? "nothing to import") + ")")
        }
        let kept = resources.map { JSONValue.object($0).serialized() }.joined(separator: "\n") + "\n"
        var document = try FHIRReader.read(resources, file: file, bytes: Array(kept.utf8), importDate: importDate)
        document.keptExtension = "ndjson"
        document.skipped += skipped
        return document
    }

    /// Neither absolute nor leading up through `..` (either separator).
    static func isContained(_ path: String) -> Bool {
        !path.hasPrefix("/") && !path.hasPrefix("\\") && !path.split(whereSeparator: { $0 == "/" || $0 == "\\" }).contains("..")
            && !path.utf8.contains(0)
    }

    /// Every file under a `clinical-records/` folder (Apple writes one FHIR JSON file a record
    /// there): what it is, its content says (`SourceReader.jsonResources`), not its name.
    static func isClinicalRecord(_ path: String) -> Bool {
        path.split(separator: "/").dropLast().contains("clinical-records")
    }

    static func name(of path: String) -> String { String(path.split(separator: "/").last ?? "") }

    private struct PastDeclaredSize: Error {}

    /// The entry's bytes, refused when it yields more than it declared.
    static func inflate(_ entry: Entry, of archive: Archive, file: String) throws(ImportError) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(entry.uncompressedSize))
        do {
            _ = try archive.extract(entry) { data in
                bytes += data
                if UInt64(bytes.count) > entry.uncompressedSize { throw PastDeclaredSize() }
            }
        } catch is PastDeclaredSize {
            throw .archiveRefused(file: file, reason: "\(entry.path) inflates past the size it declares (a zip bomb)")
        } catch {
            throw .archiveRefused(file: file, reason: "\(entry.path) cannot be inflated (damaged)")
        }
        return bytes
    }

    /// How many `<Record ` elements `export.xml` holds, counted as it streams by (never held).
    static func countSamples(_ entry: Entry, of archive: Archive, file: String) throws(ImportError) -> Int {
        let marker = Array("<Record ".utf8)
        var count = 0, seen: UInt64 = 0
        var carry: [UInt8] = []
        do {
            _ = try archive.extract(entry) { data in
                seen += UInt64(data.count)
                if seen > entry.uncompressedSize { throw PastDeclaredSize() }
                let window = carry + data
                var index = 0
                while index + marker.count <= window.count {
                    if window[index] == marker[0] && window[index..<index + marker.count].elementsEqual(marker) {
                        count += 1
                        index += marker.count
                    } else {
                        index += 1
                    }
                }
                carry = Array(window.suffix(marker.count - 1))
            }
        } catch is PastDeclaredSize {
            throw .archiveRefused(file: file, reason: "export.xml inflates past the size it declares (a zip bomb)")
        } catch {
            throw .archiveRefused(file: file, reason: "export.xml cannot be inflated (damaged)")
        }
        return count
    }
}
