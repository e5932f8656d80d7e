import BinderFormat
import Foundation

/// A folder as a source (Apple Health's export folder or its `clinical-records/`, a bulk
/// export's files, a folder of PDFs, photos and notes): its FHIR JSON files are one source
/// together (their references resolve across files, and the resources are kept once, as
/// NDJSON); a C-CDA in it is a source of its own; a PDF, image, audio, video or text file is
/// a source of its own (`SourceFiles`), its record in the folder its subfolders name (a known
/// category by name); a SMART Health Card (a `.smart-health-card` file's JSON, or text that is
/// `shc:/` codes), recognised by content, is a card source of its own; any other file is left
/// out and listed: one over the size limit, XML
/// that declares a DOCTYPE (Apple Health's `export.xml` of samples: never parsed), a format
/// binder does not import.
/// Subfolders are read to `maximumDepth`; links and hidden files never. The size limit bounds
/// each file (one over it is left out and listed) and the total of the files read: a folder
/// past it is refused whole, by name (`ImportError.folderTooLarge`).
public enum SourceFolder {
    public static let maximumDepth = 3

    public static func read(path: String, file: String, maximumBytes: Int = ImportLimits.defaultMaximumBytes,
                            importDate: String, into: String? = nil, issuerKeys: IssuerKeys? = nil) throws(ImportError) -> [SourceDocument] {
        var walk = Walk(root: file, maximumBytes: maximumBytes, importDate: importDate, into: into, issuerKeys: issuerKeys)
        try walk.read(folder: path, shown: file, relative: [])
        if !walk.resources.isEmpty {
            let kept = walk.resources.map { JSONValue.object($0).serialized() }.joined(separator: "\n") + "\n"
            var folder = try FHIRReader.read(walk.resources, file: file, bytes: Array(kept.utf8), importDate: importDate)
            folder.keptExtension = "ndjson"
            folder.skipped += walk.skipped
            walk.documents.insert(folder, at: 0)
        } else if var first = walk.documents.first {
            first.skipped += walk.skipped
            walk.documents[0] = first
        } else {
            throw .notRecognised(file: file)
        }
        return walk.documents
    }

    private struct Walk {
        /// The folder as named on the command line: the total's limit is the folder's.
        let root: String
        let maximumBytes: Int
        let importDate: String
        /// Where files' records go (`SourceFiles.folder(for:into:)`).
        let into: String?
        /// A card's signature is checked against these when given (as a card named on the command line).
        let issuerKeys: IssuerKeys?
        var documents: [SourceDocument] = []
        var resources: [JSONObject] = []
        var skipped: [SkippedItem] = []
        var total = 0

        mutating func read(folder path: String, shown: String, relative: [String]) throws(ImportError) {
            let names: [String]
            do { names = try FileManager.default.contentsOfDirectory(atPath: path).filter { !$0.hasPrefix(".") }.sorted() } catch {
                throw .unreadable(file: shown, errno: EACCES)
            }
            for name in names {
                let member = path + "/" + name, memberShown = shown + "/" + name
                var status = stat()
                guard lstat(member, &status) == 0 else { continue }
                switch status.st_mode & S_IFMT {
                case S_IFDIR where relative.count + 1 < SourceFolder.maximumDepth:
                    try read(folder: member, shown: memberShown, relative: relative + [name])
                case S_IFREG:
                    try readFile(member, shown: memberShown, name: name, size: Int(status.st_size), relative: relative,
                                 modified: Int64(status.st_mtim.tv_sec))
                default:
                    skipped.append(SkippedItem(file: memberShown, what: name, reason: "not a regular file or too deep (not read)"))
                }
            }
        }

        mutating func readFile(_ path: String, shown: String, name: String, size: Int, relative: [String], modified: Int64) throws(ImportError) {
            guard size <= maximumBytes else {
                return skipped.append(SkippedItem(file: shown, what: name, reason: "\(size) bytes, over the size limit (not read)"))
            }
            // The folder's total is checked before the file is read, and again with what was read (a file may grow).
            // (A sparse file may declare a size near Int.max: the sum saturates rather than traps.)
            let (withIt, overflow) = total.addingReportingOverflow(size)
            if overflow || withIt > maximumBytes { throw .folderTooLarge(folder: root, bytes: overflow ? Int.max : withIt, limit: maximumBytes) }
            let bytes = try SourceReader.load(path: path, file: shown, maximumBytes: maximumBytes)
            total += bytes.count
            if total > maximumBytes { throw .folderTooLarge(folder: root, bytes: total, limit: maximumBytes) }
            switch SourceReader.firstByte(bytes) {
            case UInt8(ascii: "<")?:
                do { documents.append(try SourceReader.parse(bytes, file: shown, importDate: importDate)) } catch .notRecognised {
                    skipped.append(SkippedItem(file: shown, what: name, reason: "XML that is not C-CDA"))
                } catch .declarationRefused {
                    // Apple Health's export.xml declares its DTD: a folder's file is left unread, not the import refused.
                    skipped.append(SkippedItem(file: shown, what: name, reason: "XML with a DOCTYPE (not parsed; Apple Health's samples are not imported)"))
                }
            case UInt8(ascii: "{")?:
                do {
                    switch try SourceReader.jsonContent(bytes, file: shown) {
                    case .healthCard(let jwss):
                        documents.append(try SmartHealthCard.read(jwss: jwss, file: shown, bytes: bytes, importDate: importDate, issuerKeys: issuerKeys))
                    case .resources(let found): resources += found
                    }
                } catch .notRecognised {
                    skipped.append(SkippedItem(file: shown, what: name, reason: "JSON that is not FHIR"))
                }
            default:
                // Text that is shc:/ codes is a card (whatever its name); other text a note.
                if let jwss = try SourceReader.healthCardText(bytes, file: shown) {
                    documents.append(try SmartHealthCard.read(jwss: jwss, file: shown, bytes: bytes, importDate: importDate, issuerKeys: issuerKeys))
                } else if let document = try SourceFiles.document(bytes, file: shown, name: name, folder: SourceFiles.folder(for: relative, into: into),
                                                           modified: modified, importDate: importDate) {
                    documents.append(document)
                } else {
                    skipped.append(SkippedItem(file: shown, what: name, reason: "not a format binder imports"))
                }
            }
        }
    }
}
