import BinderFormat
import Foundation

public enum ExportFormat: String, CaseIterable, Sendable {
    case pdf, html, fhir

    /// `pdf`, `html`, `fhir.json`.
    public var fileExtension: String { self == .fhir ? "fhir.json" : rawValue }
}

/// `binder export`: the chosen records, read from the decrypted view, as one file.
public enum Exporter {
    /// The export's bytes, made in memory.
    public static func render(_ content: ExportContent, as format: ExportFormat) throws -> [UInt8] {
        switch format {
        case .pdf: return try PDFExport.render(content)
        case .html: return HTMLExport.render(content)
        case .fhir: return try FHIRExport.render(content)
        }
    }

    /// `Mei-Ling-Chen-records-2026-11-23.pdf`: the patient's name (letters and digits of any
    /// script; nothing else from the binder) and the day.
    public static func defaultFileName(for content: ExportContent, format: ExportFormat) -> String {
        var words: [String] = []
        var word = ""
        for character in content.patient.name ?? "" {
            if character.isLetter || character.isNumber { word.append(character) } else if !word.isEmpty {
                words.append(word)
                word = ""
            }
        }
        if !word.isEmpty { words.append(word) }
        var stem = words.joined(separator: "-")
        while stem.utf8.count > 120 { stem.removeLast() }
        let day = HTMLExport.exportDay(content)
        return (stem.isEmpty ? "" : stem + "-") + "records-\(day).\(format.fileExtension)"
    }

    /// Writes the export at `path`, readable by its owner only (0600, also when it replaces a
    /// file), and flushed to disk before returning. Nothing else is written anywhere.
    public static func write(_ bytes: [UInt8], to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw ExportError.write(path: path, reason: String(cString: strerror(errno))) }
        defer { close(descriptor) }
        guard fchmod(descriptor, 0o600) == 0 else { throw ExportError.write(path: path, reason: String(cString: strerror(errno))) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                buffer.baseAddress.map { Foundation.write(descriptor, $0 + offset, bytes.count - offset) } ?? 0
            }
            if written < 0 {
                if errno == EINTR { continue }
                throw ExportError.write(path: path, reason: String(cString: strerror(errno)))
            }
            if written == 0 { throw ExportError.write(path: path, reason: "nothing more could be written") }
            offset += written
        }
        guard fsync(descriptor) == 0 else { throw ExportError.write(path: path, reason: String(cString: strerror(errno))) }
    }
}
