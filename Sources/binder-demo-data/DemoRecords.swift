import BinderCore
import BinderFormat

/// The demo binder's records: visits with addendums and a photo, labs with a PDF report,
/// a condition folder with photos, medications, allergies and immunizations. Fictional data.
enum DemoRecords {
    static func document(_ type: String, _ created: String, _ value: String, _ extra: JSONObject = [:],
                         children: [MedicalDocument] = []) -> MedicalDocument {
        var metadata: JSONObject = ["type": .string(type), "created": .string(created), "updated": .string(created)]
        for (key, value) in extra { metadata[key] = value }
        return MedicalDocument(value: value, metadata: metadata, children: children)
    }

    static func write(with writer: BinderWriter) throws {
        try writeFolders(with: writer)
        try writeVisits(with: writer)
        try writeLabs(with: writer)
        try writeConditions(with: writer)
        try writeMedicationsAllergiesAndImmunizations(with: writer)
        try writer.commit(message: "Add demo entries")
    }

    private static func writeFolders(with writer: BinderWriter) throws {
        let folders: [(String, String, String, String)] = [
            ("visits", "Visits", "🩺", "#3498DB"), ("labs", "Labs", "🧪", "#9B59B6"),
            ("conditions", "Conditions", "❤️‍🩹", "#7F8C8D"), ("conditions/back-acne", "Back Acne", "📷", "#E67E22"),
            ("conditions/hypertension", "Hypertension", "🫀", "#C0392B"), ("medications", "Medications", "💊", "#27AE60"),
            ("allergies", "Allergies", "⚠️", "#E67E22"), ("immunizations", "Immunizations", "💉", "#16A085"),
        ]
        for (index, folder) in folders.enumerated() {
            try writer.putFolder(folder.0, displayName: folder.1, icon: folder.2, color: folder.3, displayOrder: index)
        }
    }

    /// An annual physical with an addendum and a doctor's note, and a consult with a photo.
    private static func writeVisits(with writer: BinderWriter) throws {
        try writer.putDocument(document("visit", "2026-02-09T14:30:00.000Z", """
            # Annual physical — Dr. Amara Okafor

            ## Subjective
            Feeling well. Occasional headaches in the afternoon.

            ## Objective
            BP 138/88 mmHg, HR 72, BMI 26.1

            ## Plan
            - Start lisinopril 10 mg daily
            - Fasting lipid panel
            - Recheck blood pressure in 3 months
            """, ["provider": "Dr. Amara Okafor", "npi": "0123456789", "tags": ["annual", "blood-pressure"]],
            children: [
                document("addendum", "2026-02-11T09:00:00.000Z", "## Addendum — labs reviewed\n\nLipid panel reviewed: LDL 142 mg/dL. Diet first, recheck in 6 months.\n"),
                document("doctor_note", "2026-02-11T09:05:00.000Z", "## Doctor's note\n\nDiscussed salt intake and daily walks.\n"),
            ]), at: BinderNaming.documentName(stem: "visits/2026-02-09-annual-physical"))

        let kneePath = BinderNaming.documentName(stem: "visits/2026-03-15-knee-pain-consult")
        let kneePhoto = try writer.attachmentChild(DemoFiles.png(width: 96, height: 64) { x, y in
            (UInt8(120 + x), UInt8(90 + y), 80)
        }, fileName: "knee-swelling.png", documentPath: kneePath, created: "2026-03-15T10:20:00.000Z")
        try writer.putDocument(document("visit", "2026-03-15T10:00:00.000Z", """
            # Knee pain consult

            Right knee pain after running, three weeks. Mild swelling, full range of motion.

            Plan: rest, ice, physiotherapy referral.
            """, ["provider": "Dr. Lucas Martin", "tags": ["knee", "sports"]], children: [kneePhoto]), at: kneePath)
    }

    /// A lipid panel and its PDF report.
    private static func writeLabs(with writer: BinderWriter) throws {
        try writer.putDocument(document("lab", "2026-02-10T08:15:00.000Z", """
            # Lipid panel

            | Test | Result | Range |
            |---|---|---|
            | Total cholesterol | 221 mg/dL | < 200 |
            | LDL | 142 mg/dL | < 130 |
            | HDL | 51 mg/dL | > 40 |
            | Triglycerides | 140 mg/dL | < 150 |

            The full report is `2026-02-10-lipid-panel-report.pdf` in this folder.
            """, ["provider": "City Lab", "tags": ["cholesterol"]]), at: BinderNaming.documentName(stem: "labs/2026-02-10-lipid-panel"))
        try writer.putAttachment(DemoFiles.pdf(lines: ["City Lab — Lipid panel", "Collected 2026-02-10 08:15",
                                                       "Total cholesterol 221 mg/dL", "LDL 142 mg/dL", "HDL 51 mg/dL",
                                                       "Triglycerides 140 mg/dL"]),
                                 fileName: "2026-02-10-lipid-panel-report.pdf", folder: "labs", created: "2026-02-10T12:00:00.000Z")
    }

    /// Back acne (an overview and weekly photos) and hypertension.
    private static func writeConditions(with writer: BinderWriter) throws {
        try writer.putDocument(document("condition", "2026-01-20T16:00:00.000Z", """
            # Back acne

            Started in December. Trying benzoyl peroxide wash; photos weekly to track progress.
            """, ["tags": ["dermatology"]]), at: BinderNaming.documentName(stem: "conditions/back-acne/2026-01-20-overview"))
        for (index, day) in ["2026-01-27", "2026-02-03"].enumerated() {
            try writer.putAttachment(DemoFiles.png(width: 64, height: 48) { x, y in
                (UInt8(200 - index * 40), UInt8(140 + (x + y) % 40), UInt8(120 + index * 30))
            }, fileName: "\(day)-photo.png", folder: "conditions/back-acne", created: "\(day)T19:00:00.000Z")
        }
        try writer.putDocument(document("condition", "2026-02-09T15:00:00.000Z", """
            # Hypertension, stage 1

            Diagnosed at the annual physical. Home readings twice a day.
            """, ["tags": ["blood-pressure"]]), at: BinderNaming.documentName(stem: "conditions/hypertension/2026-02-09-overview"))
    }

    private static func writeMedicationsAllergiesAndImmunizations(with writer: BinderWriter) throws {
        try writer.putDocument(document("medication", "2026-02-09T15:10:00.000Z", """
            # Lisinopril 10 mg

            One tablet every morning. Prescribed by Dr. Amara Okafor.
            """, ["dosage": "10 mg", "frequency": "daily", "tags": ["blood-pressure"]]),
            at: BinderNaming.documentName(stem: "medications/2026-02-09-lisinopril"))
        try writer.putDocument(document("allergy", "2025-02-25T21:10:44.007Z", """
            # Penicillin allergy

            Hives (moderate) after amoxicillin in 2009.
            """, ["tags": ["drug"]]), at: BinderNaming.documentName(stem: "allergies/2025-02-25-penicillin"))
        try writer.putDocument(document("immunization", "2025-10-01T11:00:00.000Z", """
            # Influenza vaccine 2025–26

            Left deltoid, lot FLU-2025-0931.
            """), at: BinderNaming.documentName(stem: "immunizations/2025-10-01-influenza"))
    }
}
