import BinderImport
import Foundation
import XCTest

/// The documents under Tests/Fixtures/import (written for binder in the shape of HL7's
/// published C-CDA and FHIR examples; every person and fact made up).
enum ImportFixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/import")

    static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    static func bytes(_ name: String) throws -> [UInt8] { Array(try Data(contentsOf: directory.appendingPathComponent(name))) }

    static func read(_ name: String, date: String = "2026-12-06") throws -> SourceDocument {
        try SourceReader.read(path: path(name), file: name, importDate: date)
    }

    /// A C-CDA wrapper around one section (`body`), for small cases.
    static func ccd(section body: String, patient: String = "<given>Mei-Ling</given><family>Chen</family>", born: String = "19850214") -> [UInt8] {
        Array("""
        <?xml version="1.0"?>
        <ClinicalDocument xmlns="urn:hl7-org:v3" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:sdtc="urn:hl7-org:sdtc">
          <id root="1.2.3" extension="X"/>
          <title>Test document</title>
          <effectiveTime value="20240101"/>
          <recordTarget><patientRole><patient><name>\(patient)</name><birthTime value="\(born)"/></patient></patientRole></recordTarget>
          <custodian><assignedCustodian><representedCustodianOrganization><name>Test Clinic</name></representedCustodianOrganization></assignedCustodian></custodian>
          <component><structuredBody><component><section>
        \(body)
          </section></component></structuredBody></component>
        </ClinicalDocument>
        """.utf8)
    }
}
