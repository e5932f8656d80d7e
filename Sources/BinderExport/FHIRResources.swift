/// The FHIR R4 resources `binder export --format fhir` writes, as Codable types of our own:
/// only the elements we fill. Names and shapes follow https://hl7.org/fhir/R4/.
enum FHIR {
    struct Bundle: Codable {
        var resourceType = "Bundle"
        var identifier: Identifier
        var type = "document"
        var timestamp: String
        var entry: [Entry]
    }

    struct Entry: Codable {
        var fullUrl: String
        var resource: Resource
    }

    /// The resources a bundle entry may hold; encoded as the resource itself.
    enum Resource: Codable {
        case patient(Patient)
        case composition(Composition)
        case condition(Condition)
        case medicationStatement(MedicationStatement)
        case allergyIntolerance(AllergyIntolerance)
        case immunization(Immunization)
        case observation(Observation)
        case documentReference(DocumentReference)

        private enum Key: String, CodingKey { case resourceType }

        init(from decoder: any Decoder) throws {
            let type = try decoder.container(keyedBy: Key.self).decode(String.self, forKey: .resourceType)
            switch type {
            case "Patient": self = .patient(try Patient(from: decoder))
            case "Composition": self = .composition(try Composition(from: decoder))
            case "Condition": self = .condition(try Condition(from: decoder))
            case "MedicationStatement": self = .medicationStatement(try MedicationStatement(from: decoder))
            case "AllergyIntolerance": self = .allergyIntolerance(try AllergyIntolerance(from: decoder))
            case "Immunization": self = .immunization(try Immunization(from: decoder))
            case "Observation": self = .observation(try Observation(from: decoder))
            case "DocumentReference": self = .documentReference(try DocumentReference(from: decoder))
            default:
                throw DecodingError.dataCorruptedError(forKey: .resourceType, in: try decoder.container(keyedBy: Key.self),
                                                       debugDescription: "not a resource binder writes")
            }
        }

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .patient(let r): try r.encode(to: encoder)
            case .composition(let r): try r.encode(to: encoder)
            case .condition(let r): try r.encode(to: encoder)
            case .medicationStatement(let r): try r.encode(to: encoder)
            case .allergyIntolerance(let r): try r.encode(to: encoder)
            case .immunization(let r): try r.encode(to: encoder)
            case .observation(let r): try r.encode(to: encoder)
            case .documentReference(let r): try r.encode(to: encoder)
            }
        }
    }

    // MARK: - Data types

    struct Narrative: Codable {
        var status = "generated"
        /// XHTML: `<div xmlns="http://www.w3.org/1999/xhtml">…</div>`.
        var div: String
    }

    struct Coding: Codable {
        var system: String?
        var code: String?
        var display: String?
    }

    struct CodeableConcept: Codable {
        var coding: [Coding]?
        var text: String?
    }

    struct Reference: Codable {
        var reference: String?
        var display: String?
    }

    struct Identifier: Codable {
        var type: CodeableConcept?
        var system: String?
        var value: String?
    }

    struct Annotation: Codable {
        var time: String?
        var text: String
    }

    struct HumanName: Codable {
        var text: String
    }

    struct ContactPoint: Codable {
        var system: String?
        var value: String
    }

    struct Attachment: Codable {
        var contentType: String?
        /// Base64 of the bytes.
        var data: String?
        var size: Int?
        var title: String?
        var creation: String?
    }

    struct Quantity: Codable {
        var value: Double
        var unit: String?
    }

    // MARK: - Resources

    struct Patient: Codable {
        var resourceType = "Patient"
        var id: String
        var text: Narrative?
        var identifier: [Identifier]?
        var name: [HumanName]?
        var birthDate: String?
        var contact: [Contact]?

        struct Contact: Codable {
            var relationship: [CodeableConcept]?
            var name: HumanName?
        }
    }

    struct Composition: Codable {
        var resourceType = "Composition"
        var id: String
        var text: Narrative?
        var status = "final"
        var type: CodeableConcept
        var subject: Reference
        var date: String
        var author: [Reference]
        var title: String
        var section: [Section]

        struct Section: Codable {
            var title: String
            var code: CodeableConcept?
            var text: Narrative
            var entry: [Reference]?
        }
    }

    struct Condition: Codable {
        var resourceType = "Condition"
        var id: String
        var text: Narrative?
        /// binder's own: the record's path in the view (`FHIRExport.recordPathSystem`), for `binder import`.
        var identifier: [Identifier]? = nil
        var code: CodeableConcept
        var subject: Reference
        var recordedDate: String?
        var note: [Annotation]?
    }

    struct MedicationStatement: Codable {
        var resourceType = "MedicationStatement"
        var id: String
        var text: Narrative?
        /// binder's own: the record's path in the view (`FHIRExport.recordPathSystem`), for `binder import`.
        var identifier: [Identifier]? = nil
        /// What the record says is not coded: `unknown`, which R4 allows.
        var status = "unknown"
        var medicationCodeableConcept: CodeableConcept
        var subject: Reference
        var dateAsserted: String?
        var note: [Annotation]?
    }

    struct AllergyIntolerance: Codable {
        var resourceType = "AllergyIntolerance"
        var id: String
        var text: Narrative?
        /// binder's own: the record's path in the view (`FHIRExport.recordPathSystem`), for `binder import`.
        var identifier: [Identifier]? = nil
        var code: CodeableConcept
        var patient: Reference
        var recordedDate: String?
        var note: [Annotation]?
    }

    struct Immunization: Codable {
        var resourceType = "Immunization"
        var id: String
        var text: Narrative?
        /// binder's own: the record's path in the view (`FHIRExport.recordPathSystem`), for `binder import`.
        var identifier: [Identifier]? = nil
        var status = "completed"
        var vaccineCode: CodeableConcept
        var patient: Reference
        var occurrenceDateTime: String?
        var occurrenceString: String?
        var recorded: String?
        var note: [Annotation]?
    }

    struct Observation: Codable {
        var resourceType = "Observation"
        var id: String
        var text: Narrative?
        /// binder's own: the record's path in the view (`FHIRExport.recordPathSystem`), for `binder import`.
        var identifier: [Identifier]? = nil
        var status = "final"
        var category: [CodeableConcept]?
        var code: CodeableConcept
        var subject: Reference
        var effectiveDateTime: String?
        var note: [Annotation]?
        var component: [Component]?

        struct Component: Codable {
            var code: CodeableConcept
            var valueQuantity: Quantity?
            var valueString: String?
        }
    }

    struct DocumentReference: Codable {
        var resourceType = "DocumentReference"
        var id: String
        var text: Narrative?
        /// binder's own: the record's path in the view (`FHIRExport.recordPathSystem`), for `binder import`.
        var identifier: [Identifier]? = nil
        var status = "current"
        var type: CodeableConcept?
        var subject: Reference
        var date: String?
        var description: String?
        var content: [Content]

        struct Content: Codable {
            var attachment: Attachment
        }
    }
}
