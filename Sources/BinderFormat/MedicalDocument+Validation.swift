import Foundation

extension MedicalDocument {
    /// Problems that reading tolerated but that the format forbids, for `binder verify`.
    /// Each names the field (`children[0].metadata.created is missing`) and never quotes
    /// content. Empty when the document is well formed.
    public func validate() -> [String] {
        var problems: [String] = []
        collectProblems(prefix: "", into: &problems)
        return problems
    }

    private func collectProblems(prefix: String, into problems: inout [String]) {
        func report(_ field: String, _ problem: String) {
            problems.append(prefix + field + " " + problem)
        }

        if type.isEmpty { report("metadata.type", "is empty") }
        checkTimestamp("created", required: true, report: report)
        checkTimestamp("updated", required: false, report: report)

        if !keyOrder.contains(where: { $0.hasSameUTF8(as: Self.childrenKey) }) {
            report("children", "is missing (read as empty)")
        }
        if let npi = metadata["npi"] {
            let isDigits = npi.stringValue.map { !$0.isEmpty && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }
            if isDigits != true { report("metadata.npi", "must be a string of digits") }
        }
        if let tags = metadata["tags"] {
            let allStrings = tags.arrayValue?.allSatisfy { $0.stringValue != nil }
            if allStrings != true { report("metadata.tags", "must be an array of strings") }
        }
        for key in ["displayOrder", "durationMs"] {
            if let field = metadata[key], field.numberText == nil { report("metadata.\(key)", "must be a number") }
        }
        if let size = metadata["originalSizeBytes"], (size.intValue ?? -1) < 0 {
            report("metadata.originalSizeBytes", "must be a non-negative integer")
        }
        if let encoding = metadata["encoding"] {
            let known = encoding.stringValue.map { $0.hasSameUTF8(as: "base64") || $0.hasSameUTF8(as: "binary") }
            if known != true { report("metadata.encoding", "must be \"base64\" or \"binary\"") }
        }
        if let format = metadata["format"], format.stringValue?.isEmpty ?? true {
            report("metadata.format", "must be a non-empty string")
        }

        if isAttachmentRef {
            if metadata["format"] == nil { report("metadata.format", "is missing") }
            if value.isEmpty {
                report("value", "must name the sidecar file")
            } else if value.utf8.contains(UInt8(ascii: "/")) || value.hasSameUTF8(as: ".") || value.hasSameUTF8(as: "..") {
                report("value", "must be a file name in the same folder")
            }
        }
        if isInlineAttachment {
            if metadata["format"] == nil { report("metadata.format", "is missing") }
            if Data(base64Encoded: value) == nil { report("value", "is not valid base64") }
        }

        for (index, child) in children.enumerated() {
            child.collectProblems(prefix: "\(prefix)children[\(index)].", into: &problems)
        }
    }

    private func checkTimestamp(_ key: String, required: Bool, report: (String, String) -> Void) {
        guard let field = metadata[key] else {
            if required { report("metadata.\(key)", "is missing") }
            return
        }
        guard let text = field.stringValue else {
            report("metadata.\(key)", "must be a string")
            return
        }
        if Timestamps.parse(text) == nil { report("metadata.\(key)", "is not an ISO 8601 timestamp") }
    }
}
