import BinderFormat
import Foundation

/// A folder as a source (Apple Health's `clinical-records/`, a bulk export's files): its FHIR
/// JSON files are one source together (their references resolve across files, and the folder's
/// resources are kept once, as NDJSON); a C-CDA in it is a source of its own; any other file is
/// left out and listed. Only the folder's own files are read (no subfolders, no hidden files),
/// within the size limit in total.
public enum SourceFolder {
    public static func read(path: String, file: String, maximumBytes: Int = ImportLimits.defaultMaximumBytes,
                            importDate: String) throws(ImportError) -> [SourceDocument] {
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: path).filter { !$0.hasPrefix(".") }.sorted() } catch {
            throw .unreadable(file: file, errno: (error as NSError).code == NSFileReadNoPermissionError ? EACCES : EIO)
        }
        var documents: [SourceDocument] = []
        var resources: [JSONObject] = []
        var skipped: [SkippedItem] = []
        var total = 0
        for name in names {
            let member = path + "/" + name, shown = file + "/" + name
            var status = stat()
            guard lstat(member, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
                skipped.append(SkippedItem(file: shown, what: name, reason: "not a regular file (subfolders and links are not read)"))
                continue
            }
            let bytes = try SourceReader.load(path: member, file: shown, maximumBytes: maximumBytes)
            total += bytes.count
            if total > maximumBytes { throw .tooLarge(file: file, bytes: total, limit: maximumBytes) }
            switch SourceReader.firstByte(bytes) {
            case UInt8(ascii: "<")?:
                do { documents.append(try SourceReader.parse(bytes, file: shown, importDate: importDate)) } catch .notRecognised {
                    skipped.append(SkippedItem(file: shown, what: name, reason: "not C-CDA or FHIR JSON"))
                }
            case UInt8(ascii: "{")?:
                do { resources += try SourceReader.jsonResources(bytes, file: shown) } catch .notRecognised {
                    skipped.append(SkippedItem(file: shown, what: name, reason: "JSON that is not FHIR"))
                }
            default:
                skipped.append(SkippedItem(file: shown, what: name, reason: "not C-CDA or FHIR JSON"))
            }
        }
        if !resources.isEmpty {
            let kept = resources.map { JSONValue.object($0).serialized() }.joined(separator: "\n") + "\n"
            var folder = try FHIRReader.read(resources, file: file, bytes: Array(kept.utf8), importDate: importDate)
            folder.keptExtension = "ndjson"
            folder.skipped += skipped
            documents.insert(folder, at: 0)
        } else if var first = documents.first {
            first.skipped += skipped
            documents[0] = first
        } else if !skipped.isEmpty || names.isEmpty {
            throw .notRecognised(file: file)
        }
        return documents
    }
}
