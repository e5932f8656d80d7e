import Testing
@testable import BinderFormat

@Suite struct MedicalDocumentTests {
    private func document(_ text: String) throws(FormatError) -> MedicalDocument {
        try MedicalDocument(plaintext: text.bytes)
    }

    private func formatError(_ text: String) -> FormatError? {
        do {
            _ = try document(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func errorsNameTheField() {
        #expect(formatError("[]")?.description == "document must be an object")
        #expect(formatError(#"{"metadata":{"type":"x"}}"#)?.description == "value is missing")
        #expect(formatError(#"{"value":1,"metadata":{"type":"x"}}"#)?.description == "value must be a string")
        #expect(formatError(#"{"value":""}"#)?.description == "metadata is missing")
        #expect(formatError(#"{"value":"","metadata":[]}"#)?.description == "metadata must be an object")
        #expect(formatError(#"{"value":"","metadata":{}}"#)?.description == "metadata.type is missing")
        #expect(formatError(#"{"value":"","metadata":{"type":3}}"#)?.description == "metadata.type must be a string")
        #expect(formatError(#"{"value":"","metadata":{"type":"x"},"children":{}}"#)?.description
            == "children must be an array")
        let nested = #"""
            {"value":"","metadata":{"type":"visit"},"children":[
              {"value":"","metadata":{"type":"addendum"}},
              {"value":"","metadata":{"created":"2026-01-01T00:00:00.000Z"}}]}
            """#
        #expect(formatError(nested) == .missing(field: "children[1].metadata.type"))
        #expect(formatError(nested)?.description == "children[1].metadata.type is missing")
        let deeper = #"{"value":"","metadata":{"type":"a"},"children":[{"value":"","metadata":{"type":"b"},"children":[5]}]}"#
        #expect(formatError(deeper)?.description == "children[0].children[0] must be an object")
        if case .invalidJSON? = formatError("{") {} else { Issue.record("expected invalidJSON") }
    }

    @Test func missingChildrenIsToleratedAndNotAdded() throws {
        let text = #"{"value":"x","metadata":{"type":"note","created":"2026-01-01T00:00:00.000Z"}}"#
        let parsed = try document(text)
        #expect(parsed.children.isEmpty)
        #expect(parsed.serialized() == text)
        #expect(parsed.validate() == ["children is missing (read as empty)"])
        var withChild = parsed
        withChild.children.append(MedicalDocument(type: "addendum", value: "y", now: "2026-01-02T00:00:00.000Z"))
        #expect(withChild.serialized() == #"{"value":"x","metadata":{"type":"note","created":"2026-01-01T00:00:00.000Z"},"children":[{"value":"y","metadata":{"type":"addendum","created":"2026-01-02T00:00:00.000Z","updated":"2026-01-02T00:00:00.000Z"},"children":[]}]}"#)
    }

    @Test func keepsUnusualKeyOrderAndUnknownFields() throws {
        let text = #"{"x-first":{"n":[1.50,{"deep":null}]},"children":[],"metadata":{"zeta":1,"type":"lab","created":"2025-01-01"},"renderer":"R","value":"v","editor":"E"}"#
        var parsed = try document(text)
        #expect(parsed.serialized() == text)
        #expect(parsed.extraFields.keys == ["x-first", "renderer", "editor"])
        parsed.value = "changed"
        parsed.extraFields["added"] = true
        parsed.extraFields["renderer"] = nil
        #expect(parsed.serialized() == #"{"x-first":{"n":[1.50,{"deep":null}]},"children":[],"metadata":{"zeta":1,"type":"lab","created":"2025-01-01"},"value":"changed","editor":"E","added":true}"#)
    }

    @Test func newDocumentsUseTheAppsKeyOrder() {
        let document = MedicalDocument(value: "# Hi", metadata: ["type": "visit", "created": "2026-02-09T14:30:00.000Z"])
        #expect(document.serialized() == ##"{"value":"# Hi","metadata":{"type":"visit","created":"2026-02-09T14:30:00.000Z"},"children":[]}"##)
        let fresh = MedicalDocument(type: "lab", value: "", now: "2026-02-09T14:30:00.000Z")
        #expect(fresh.serialized() == #"{"value":"","metadata":{"type":"lab","created":"2026-02-09T14:30:00.000Z","updated":"2026-02-09T14:30:00.000Z"},"children":[]}"#)
        #expect(MedicalDocument(type: "note", value: "").created.flatMap(Timestamps.parse) != nil)
    }

    @Test func accessors() throws {
        var document = try document(#"{"value":"photo.jpg.enc","metadata":{"type":"attachment_ref","created":"2025-02-19T18:26:41.729Z","format":"jpeg"},"children":[]}"#)
        #expect(document.type == "attachment_ref")
        #expect(document.isAttachmentRef)
        #expect(!document.isInlineAttachment)
        #expect(document.format == "jpeg")
        #expect(document.created == "2025-02-19T18:26:41.729Z")
        #expect(document.updated == nil)
        #expect(document.modificationTime?.seconds == 1_739_989_601)
        #expect(document.modificationTime?.nanoseconds == 729_000_000)
        document.updated = "2026-01-01T00:00:00.000Z"
        #expect(document.metadata.keys == ["type", "created", "format", "updated"])
        #expect(document.modificationTime?.seconds == 1_767_225_600)
        document.updated = nil
        document.type = "attachment"
        #expect(document.metadata.keys == ["type", "created", "format"])
        #expect(document.isInlineAttachment)
    }

    @Test func equalityIsByteExact() throws {
        let a = MedicalDocument(value: "caf\u{e9}", metadata: ["type": "note"])
        let b = MedicalDocument(value: "cafe\u{301}", metadata: ["type": "note"])
        #expect(a != b)
        #expect(a == MedicalDocument(value: "caf\u{e9}", metadata: ["type": "note"]))
    }

    @Test func validateReportsProblemsByField() throws {
        let text = #"""
            {"value":"","metadata":{"type":"","npi":1234567890,"tags":["a",2],"displayOrder":"3",
             "originalSizeBytes":-1,"encoding":"hex","updated":"yesterday"},
             "children":[{"value":"../x.enc","metadata":{"type":"attachment_ref","created":"2026-02-30T00:00:00Z"},"children":[]},
                         {"value":"not base64!","metadata":{"type":"attachment","format":"png","created":"2026-02-09T14:30:00Z"},"children":[]}]}
            """#
        let problems = try document(text).validate()
        #expect(problems == [
            "metadata.type is empty",
            "metadata.created is missing",
            "metadata.updated is not an ISO 8601 timestamp",
            "metadata.npi must be a string of digits",
            "metadata.tags must be an array of strings",
            "metadata.displayOrder must be a number",
            "metadata.originalSizeBytes must be a non-negative integer",
            "metadata.encoding must be \"base64\" or \"binary\"",
            "children[0].metadata.created is not an ISO 8601 timestamp",
            "children[0].metadata.format is missing",
            "children[0].value must be a file name in the same folder",
            "children[1].value is not valid base64",
        ])
    }
}
