/// Between an attachment's `metadata.format` and a file name extension.
///
/// Formats are what the apps write (`jpeg`, `jpg`, `png`, `pdf`, `m4a`, `mp4`…). The
/// apps name a JPEG photo's sidecar `….jpg.enc` while its format is `jpeg`; every other
/// format is its own extension.
public enum AttachmentFormats {
    public enum MediaKind: Sendable, Equatable {
        case image, audio, video, document, other
    }

    /// The extension (without a dot) for a file holding an attachment of `format`:
    /// `jpeg` → `jpg`, otherwise the format in lowercase. A format that cannot be an
    /// extension (empty, longer than 16 characters, anything but ASCII letters and
    /// digits) gives `bin`, so a shown file never gets a strange or unsafe name.
    public static func fileExtension(format: String) -> String {
        let lowered = format.lowercased()
        if lowered == "jpeg" { return "jpg" }
        return isUsableToken(lowered) ? lowered : "bin"
    }

    /// The `metadata.format` for a file written through the mount with extension `ext`
    /// (with or without a leading dot): `jpg`/`jpeg` → `jpeg` as the apps write photos,
    /// otherwise the extension in lowercase; nil when there is no usable extension.
    public static func format(forExtension ext: String) -> String? {
        var lowered = ext.lowercased()
        if lowered.hasPrefix(".") { lowered.removeFirst() }
        if lowered == "jpg" || lowered == "jpeg" { return "jpeg" }
        return isUsableToken(lowered) ? lowered : nil
    }

    /// The broad kind of a format, for structural commit messages ("Add photo",
    /// "Add audio recording") and for choosing `encoding`.
    public static func kind(format: String) -> MediaKind {
        switch format.lowercased() {
        case "jpeg", "jpg", "png", "gif", "webp", "heic", "heif", "bmp", "tif", "tiff", "svg":
            return .image
        case "m4a", "aac", "mp3", "wav", "ogg", "oga", "opus", "flac", "caf", "amr", "weba":
            return .audio
        case "mp4", "mov", "m4v", "webm", "mkv", "avi", "3gp":
            return .video
        case "pdf", "txt", "doc", "docx", "rtf", "odt", "csv", "xls", "xlsx", "html", "xml", "json":
            return .document
        default:
            return .other
        }
    }

    /// `metadata.encoding` as the apps set it: `binary` for audio and video recordings,
    /// `base64` for the rest (the sample binder: m4a → binary, jpeg/png → base64).
    /// Either way the sidecar's plaintext is the base64 text of the bytes.
    public static func defaultEncoding(format: String) -> String {
        switch kind(format: format) {
        case .audio, .video: return "binary"
        default: return "base64"
        }
    }

    private static func isUsableToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 16
            && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) }
    }
}
