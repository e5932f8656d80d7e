import Foundation
import Testing
@testable import BinderFormat

@Suite struct TimestampsTests {
    @Test(arguments: [
        ("2026-02-09T14:30:00.000Z", 1_770_647_400, 0),
        ("2026-02-09T14:30:00Z", 1_770_647_400, 0),
        ("2026-02-09T14:30:00.123Z", 1_770_647_400, 123_000_000),
        ("2026-02-09T14:30:00.123456789Z", 1_770_647_400, 123_456_789),
        ("2026-02-09T14:30:00.1234567891Z", 1_770_647_400, 123_456_789),
        ("2026-02-09T14:30:00.5Z", 1_770_647_400, 500_000_000),
        ("2026-02-09T16:30:00+02:00", 1_770_647_400, 0),
        ("2026-02-09T09:00:00.000-05:30", 1_770_647_400, 0),
        ("2026-02-09T16:30:00+0200", 1_770_647_400, 0),
        ("2026-02-09T16:30:00+02", 1_770_647_400, 0),
        ("2026-02-09T14:30Z", 1_770_647_400, 0),
        ("2026-02-09 14:30:00Z", 1_770_647_400, 0),
        ("2026-02-09t14:30:00z", 1_770_647_400, 0),
        ("2026-02-09T14:30:00", 1_770_647_400, 0),
        ("2020-05-15", 1_589_500_800, 0),
        ("2024-02-29T12:00:00Z", 1_709_208_000, 0),
        ("1969-12-31T23:59:59.000Z", -1, 0),
        ("0001-01-01T00:00:00.000Z", -62_135_596_800, 0),
        ("9999-12-31T23:59:59Z", 253_402_300_799, 0),
    ])
    func parsesISO8601Variants(text: String, seconds: Int64, nanoseconds: Int32) throws {
        let parsed = try #require(Timestamps.parse(text))
        #expect(parsed.seconds == seconds)
        #expect(parsed.nanoseconds == nanoseconds)
    }

    @Test(arguments: [
        "", "2026", "2026-02", "2026-2-9", "2026-02-30", "2025-02-29", "2026-13-01", "2026-00-10",
        "2026-02-09T24:00:00Z", "2026-02-09T14:60:00Z", "2026-02-09T14:30:60Z", "2026-02-09T14:30:00.Z",
        "2026-02-09T14:30:00ZZ", "2026-02-09T14:30:00+2:00", "2026-02-09T14", "2026-02-09X14:30:00Z",
        "yesterday", "1770647400", " 2026-02-09", "2026-02-09T14:30:00 Z", "+02026-02-09T14:30:00Z",
    ])
    func rejectsOtherText(text: String) {
        #expect(Timestamps.parse(text) == nil)
    }

    @Test func formatsLikeToISOString() {
        #expect(Timestamps.string(seconds: 1_770_647_400) == "2026-02-09T14:30:00.000Z")
        #expect(Timestamps.string(seconds: 1_770_647_400, nanoseconds: 123_999_999) == "2026-02-09T14:30:00.123Z")
        #expect(Timestamps.string(seconds: -1, nanoseconds: 999_000_000) == "1969-12-31T23:59:59.999Z")
        #expect(Timestamps.string(seconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamps.string(from: Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
        #expect(Timestamps.string(from: Date(timeIntervalSince1970: 1_709_208_000.0071)) == "2024-02-29T12:00:00.007Z")
    }

    @Test func nowHasTheAppsFormatAndIsCurrent() throws {
        let now = Timestamps.now()
        let pattern = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/
        #expect(now.wholeMatch(of: pattern) != nil)
        let parsed = try #require(Timestamps.parse(now))
        #expect(abs(Double(parsed.seconds) - Date().timeIntervalSince1970) < 5)
    }

    @Test func formattingAndParsingAgreeAcrossTheCalendar() throws {
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<5_000 {
            let seconds = Int64.random(in: -62_135_596_800...253_402_300_799, using: &generator)
            let milliseconds = Int32.random(in: 0...999, using: &generator)
            let text = Timestamps.string(seconds: seconds, nanoseconds: milliseconds * 1_000_000)
            let parsed = try #require(Timestamps.parse(text))
            #expect(parsed.seconds == seconds && parsed.nanoseconds == milliseconds * 1_000_000, "\(text)")
        }
    }
}

@Suite struct CategoriesTests {
    @Test(arguments: [
        ("visits", "visit"), ("labs", "lab"), ("conditions", "condition"), ("medications", "medication"),
        ("allergies", "allergy"), ("immunizations", "immunization"), ("procedures", "procedure"),
        ("imaging", "imaging"), ("insurance", "insurance"), ("documents", "document"),
        ("conditions/back-acne", "condition"), ("conditions/type-2-diabetes/glucose-logs", "condition"),
        ("labs/2024", "lab"), ("/visits/", "visit"), ("Visits", "visit"), ("my-info/allergies", "allergy"),
        ("my-info", "note"), ("labs-imaging", "note"), ("", "note"), ("recipes/soup", "note"),
    ])
    func documentTypeForFolder(folder: String, type: String) {
        #expect(Categories.documentType(forFolder: folder) == type)
    }
}

@Suite struct AttachmentFormatsTests {
    @Test func extensionsForFormats() {
        #expect(AttachmentFormats.fileExtension(format: "jpeg") == "jpg")
        #expect(AttachmentFormats.fileExtension(format: "JPEG") == "jpg")
        #expect(AttachmentFormats.fileExtension(format: "jpg") == "jpg")
        #expect(AttachmentFormats.fileExtension(format: "png") == "png")
        #expect(AttachmentFormats.fileExtension(format: "pdf") == "pdf")
        #expect(AttachmentFormats.fileExtension(format: "m4a") == "m4a")
        #expect(AttachmentFormats.fileExtension(format: "mp4") == "mp4")
        #expect(AttachmentFormats.fileExtension(format: "") == "bin")
        #expect(AttachmentFormats.fileExtension(format: "../x") == "bin")
        #expect(AttachmentFormats.fileExtension(format: "image/png") == "bin")
    }

    @Test func formatsForExtensions() {
        #expect(AttachmentFormats.format(forExtension: "jpg") == "jpeg")
        #expect(AttachmentFormats.format(forExtension: ".JPEG") == "jpeg")
        #expect(AttachmentFormats.format(forExtension: "pdf") == "pdf")
        #expect(AttachmentFormats.format(forExtension: "M4A") == "m4a")
        #expect(AttachmentFormats.format(forExtension: "") == nil)
        #expect(AttachmentFormats.format(forExtension: "tar.gz") == nil)
    }

    @Test func kindsAndEncodings() {
        #expect(AttachmentFormats.kind(format: "jpeg") == .image)
        #expect(AttachmentFormats.kind(format: "m4a") == .audio)
        #expect(AttachmentFormats.kind(format: "mp4") == .video)
        #expect(AttachmentFormats.kind(format: "pdf") == .document)
        #expect(AttachmentFormats.kind(format: "xyz") == .other)
        #expect(AttachmentFormats.defaultEncoding(format: "m4a") == "binary")
        #expect(AttachmentFormats.defaultEncoding(format: "jpeg") == "base64")
        #expect(AttachmentFormats.defaultEncoding(format: "pdf") == "base64")
    }
}
