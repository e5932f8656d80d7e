import Testing
@testable import BinderFormat

/// Ground truth: every document of the sample binder, byte for byte.
@Suite struct ManifestTests {
    @Test func manifestHasTheExpectedDocuments() {
        #expect(Fixture.documents.count == 48)
        #expect(Fixture.folderMetadata.count > 10)
        #expect(Fixture.documents.allSatisfy { !$0.plaintext.isEmpty })
    }

    @Test func jsonRoundTripsEveryPlaintextByteForByte() throws {
        for document in Fixture.documents + Fixture.folderMetadata {
            let value = try JSONValue.parse(document.plaintext.bytes)
            #expect(value.serializedBytes() == document.plaintext.bytes, "\(document.path)")
            #expect(value == document.json, "\(document.path) parses to the manifest's JSON")
        }
    }

    @Test func medicalDocumentRoundTripsEveryPlaintextByteForByte() throws {
        for document in Fixture.documents {
            let parsed = try MedicalDocument(plaintext: document.plaintext.bytes)
            #expect(parsed.serialized().bytes == document.plaintext.bytes, "\(document.path)")
            #expect(parsed.serializedBytes() == document.plaintext.bytes, "\(document.path)")
            #expect(try MedicalDocument(json: parsed.json) == parsed)
        }
    }

    @Test func everyFixtureDocumentIsValid() throws {
        for document in Fixture.documents {
            let parsed = try MedicalDocument(plaintext: document.plaintext.bytes)
            #expect(parsed.validate() == [], "\(document.path)")
            #expect(parsed.modificationTime != nil, "\(document.path)")
        }
    }

    @Test func frontMatterRoundTripsEveryDocumentAndChild() throws {
        func check(_ document: MedicalDocument, _ label: String) throws {
            let file = FrontMatter.render(document)
            let parsed = try FrontMatter.parse(file.bytes)
            #expect(parsed.metadata == document.metadata, "\(label)")
            #expect(parsed.value.bytes == document.value.bytes, "\(label)")
            for (index, child) in document.children.enumerated() {
                try check(child, "\(label) children[\(index)]")
            }
        }
        for document in Fixture.documents {
            try check(try MedicalDocument(plaintext: document.plaintext.bytes), document.path)
        }
    }

    @Test func extraTopLevelFieldsAreKeptInPlace() throws {
        let medication = try #require(Fixture.documents.first { $0.path == "medications/2025-02-25-atorvastatin.json" })
        var document = try MedicalDocument(plaintext: medication.plaintext.bytes)
        #expect(document.extraFields.keys == ["renderer", "editor"])
        document.value += "\n- Note"
        document.updated = "2026-01-01T00:00:00.000Z"
        let keys = try #require(document.json.objectValue?.keys)
        #expect(keys == ["value", "metadata", "children", "renderer", "editor"])
        #expect(document.serialized().hasSuffix(#""renderer":"MedicationSummary","editor":"MedicationForm"}"#))
    }

    @Test func fixtureTypesMatchTheirFolderCategories() throws {
        let categoryTypes = Set(Categories.folderTypes.map(\.type))
        var checked = 0
        for document in Fixture.documents {
            let type = try MedicalDocument(plaintext: document.plaintext.bytes).type
            guard categoryTypes.contains(type) else { continue }
            let folder = document.path.split(separator: "/").dropLast().joined(separator: "/")
            #expect(Categories.documentType(forFolder: folder) == type, "\(document.path)")
            checked += 1
        }
        #expect(checked > 20)
    }

    @Test func sidecarNamesUseTheFormatsExtension() throws {
        var checked = 0
        for document in Fixture.documents {
            let parsed = try MedicalDocument(plaintext: document.plaintext.bytes)
            guard parsed.isAttachmentRef, let format = parsed.format else { continue }
            let stem = String(document.path.dropLast(".json".count))
            let expected = stem + "." + AttachmentFormats.fileExtension(format: format) + ".enc"
            #expect(Fixture.sidecars[expected] != nil, "\(expected)")
            #expect(expected.hasSuffix("/" + parsed.value), "value names the sidecar")
            checked += 1
        }
        #expect(checked == 4)
    }
}
