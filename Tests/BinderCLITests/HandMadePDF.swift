import Foundation

/// PDFs written by hand for the hostile cases no tool makes: a page larger than any paper,
/// thousands of pages. Each page is a black square on `mediaBox` (points), one content stream
/// shared by all, with the cross-reference table a reader needs.
enum HandMadePDF {
    static func pages(_ count: Int, mediaBox: String) -> Data {
        let content = "0 g 0 0 100 100 re f"
        let kids = (0..<count).map { "\($0 + 4) 0 R" }.joined(separator: " ")
        let objects = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [\(kids)] /Count \(count) >>",
                       "<< /Length \(content.utf8.count) >>\nstream\n\(content)\nendstream"]
            + Array(repeating: "<< /Type /Page /Parent 2 0 R /MediaBox [\(mediaBox)] /Contents 3 0 R >>", count: count)
        var pdf = "%PDF-1.4\n", offsets: [Int] = []
        for (index, object) in objects.enumerated() {
            offsets.append(pdf.utf8.count)
            pdf += "\(index + 1) 0 obj\n\(object)\nendobj\n"
        }
        let table = pdf.utf8.count
        pdf += "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
            + offsets.map { String(repeating: "0", count: 10 - String($0).count) + "\($0) 00000 n \n" }.joined()
        pdf += "trailer\n<< /Size \(objects.count + 1) /Root 1 0 R >>\nstartxref\n\(table)\n%%EOF\n"
        return Data(pdf.utf8)
    }
}
