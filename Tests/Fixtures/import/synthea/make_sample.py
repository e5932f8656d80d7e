#!/usr/bin/env python3
"""Writes synthea-shaped-patient.json: one fictional patient as a FHIR R4 transaction Bundle in the
shape Synthea (synthetichealth/synthea) gives its sample patients (src/test/resources/flexporter/
sample_complete_patient.json): `urn:uuid:` fullUrls and POST requests, a Patient with Synthea's
numbered names and US Core extensions, yearly wellness Encounters each with their Conditions,
vital-sign and laboratory Observations (blood pressure as components, a lipid panel as a
DiagnosticReport's results), Immunizations (CVX), MedicationRequests (RxNorm), Procedures,
an AllergyIntolerance, a clinical note as a DiagnosticReport's presentedForm and a
DocumentReference, and the CareTeam, CarePlan, Claim and ExplanationOfBenefit resources Synthea
adds to every encounter. Deterministic (ids are uuid5 of a name): run it again and the file is
the same. See README.md for why this file is generated rather than copied.

usage: make_sample.py [OUTPUT]   (default: synthea-shaped-patient.json beside this script)
"""
import base64
import json
import os
import sys
import uuid

NAMESPACE = uuid.UUID("6f1c1d2e-4b5a-4c3d-9e8f-0a1b2c3d4e5f")
SNOMED, LOINC, RXNORM, CVX = "http://snomed.info/sct", "http://loinc.org", "http://www.nlm.nih.gov/research/umls/rxnorm", "http://hl7.org/fhir/sid/cvx"
PATIENT_ID = str(uuid.uuid5(NAMESPACE, "patient"))
PATIENT = "urn:uuid:" + PATIENT_ID
PRACTITIONER = {"reference": "Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|9999977779", "display": "Dr. Evelina828 Runolfsdottir785"}
ORGANIZATION = {"reference": "Organization?identifier=https://github.com/synthetichealth/synthea|5a3f3d5e-0c36-3f5b-b4a4-2b1f2c3c4d5e",
                "display": "MAPLE GROVE FAMILY PRACTICE"}

entries = []


def ident(name):
    return str(uuid.uuid5(NAMESPACE, name))


def concept(system, code, display):
    return {"coding": [{"system": system, "code": code, "display": display}], "text": display}


def add(resource_type, name, resource):
    rid = ident(name)
    body = {"resourceType": resource_type, "id": rid}
    body.update(resource)
    entries.append({"fullUrl": "urn:uuid:" + rid, "resource": body, "request": {"method": "POST", "url": resource_type}})
    return "urn:uuid:" + rid


def patient():
    add("Patient", "patient", {
        "meta": {"profile": ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"]},
        "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">Generated in the shape of Synthea's output.</div>"},
        "extension": [
            {"url": "http://hl7.org/fhir/us/core/StructureDefinition/us-core-race",
             "extension": [{"url": "ombCategory", "valueCoding": {"system": "urn:oid:2.16.840.1.113883.6.238", "code": "2106-3", "display": "White"}},
                           {"url": "text", "valueString": "White"}]},
            {"url": "http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex", "valueCode": "F"},
            {"url": "http://synthetichealth.github.io/synthea/disability-adjusted-life-years", "valueDecimal": 0.8412},
        ],
        "identifier": [{"system": "https://github.com/synthetichealth/synthea", "value": PATIENT_ID},
                       {"type": concept("http://terminology.hl7.org/CodeSystem/v2-0203", "MR", "Medical Record Number"),
                        "system": "http://hospital.smarthealthit.org", "value": PATIENT_ID}],
        "name": [{"use": "official", "family": "Okuneva707", "given": ["Rosalind517"], "prefix": ["Mrs."]}],
        "telecom": [{"system": "phone", "value": "555-310-4471", "use": "home"}],
        "gender": "female",
        "birthDate": "1961-04-17",
        "address": [{"line": ["418 Kuhic Gateway"], "city": "Springfield", "state": "MA", "country": "US"}],
        "maritalStatus": concept("http://terminology.hl7.org/CodeSystem/v3-MaritalStatus", "M", "M"),
        "multipleBirthBoolean": False,
        "communication": [{"language": concept("urn:ietf:bcp:47", "en-US", "English")}],
    })


def observation(name, encounter, when, category, code, display, value=None, unit=None, components=None, value_concept=None):
    resource = {
        "status": "final",
        "category": [{"coding": [{"system": "http://terminology.hl7.org/CodeSystem/observation-category", "code": category,
                                  "display": "Vital signs" if category == "vital-signs" else category.capitalize()}]}],
        "code": concept(LOINC, code, display),
        "subject": {"reference": PATIENT}, "encounter": {"reference": encounter},
        "effectiveDateTime": when, "issued": when[:19] + ".512" + when[19:],
    }
    if value is not None:
        resource["valueQuantity"] = {"value": value, "unit": unit, "system": "http://unitsofmeasure.org", "code": unit}
    if value_concept is not None:
        resource["valueCodeableConcept"] = value_concept
    if components:
        resource["component"] = [{"code": concept(LOINC, c, d), "valueQuantity": {"value": v, "unit": "mm[Hg]", "system": "http://unitsofmeasure.org",
                                                                                  "code": "mm[Hg]"}} for c, d, v in components]
    return add("Observation", name, resource)


def visit(year, conditions=(), immunizations=(), medications=(), procedures=(), lipid=False, allergy=None):
    when = f"{year}-05-14T09:12:37-04:00"
    end = f"{year}-05-14T09:27:37-04:00"
    tag = str(year)
    encounter = add("Encounter", "encounter " + tag, {
        "meta": {"profile": ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-encounter"]},
        "identifier": [{"use": "official", "system": "https://github.com/synthetichealth/synthea", "value": ident("encounter " + tag)}],
        "status": "finished",
        "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "AMB"},
        "type": [concept(SNOMED, "162673000", "General examination of patient (procedure)")],
        "subject": {"reference": PATIENT, "display": "Mrs. Rosalind517 Okuneva707"},
        "participant": [{"type": [concept("http://terminology.hl7.org/CodeSystem/v3-ParticipationType", "PPRF", "primary performer")],
                         "period": {"start": when, "end": end}, "individual": PRACTITIONER}],
        "period": {"start": when, "end": end},
        "serviceProvider": ORGANIZATION,
    })
    made = []
    for code, display, abated in conditions:
        condition = {
            "clinicalStatus": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/condition-clinical", "code": "resolved" if abated else "active"}]},
            "verificationStatus": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/condition-ver-status", "code": "confirmed"}]},
            "category": [{"coding": [{"system": "http://terminology.hl7.org/CodeSystem/condition-category", "code": "encounter-diagnosis",
                                      "display": "Encounter Diagnosis"}]}],
            "code": concept(SNOMED, code, display),
            "subject": {"reference": PATIENT}, "encounter": {"reference": encounter},
            "onsetDateTime": when, "recordedDate": when,
        }
        if abated:
            condition["abatementDateTime"] = f"{year}-05-28T09:12:37-04:00"
        made.append(add("Condition", f"condition {code} {tag}", condition))
    observation(f"height {tag}", encounter, when, "vital-signs", "8302-2", "Body Height", 163.4, "cm")
    observation(f"weight {tag}", encounter, when, "vital-signs", "29463-7", "Body Weight", 71.2 + (year % 7), "kg")
    observation(f"bmi {tag}", encounter, when, "vital-signs", "39156-5", "Body mass index (BMI) [Ratio]", 26.7, "kg/m2")
    observation(f"bp {tag}", encounter, when, "vital-signs", "85354-9", "Blood pressure panel with all children optional",
                components=[("8462-4", "Diastolic Blood Pressure", 81), ("8480-6", "Systolic Blood Pressure", 128 + (year % 5))])
    observation(f"heart rate {tag}", encounter, when, "vital-signs", "8867-4", "Heart rate", 74, "/min")
    observation(f"smoking {tag}", encounter, when, "survey", "72166-2", "Tobacco smoking status",
                value_concept=concept(SNOMED, "8517006", "Ex-smoker (finding)"))
    observation(f"hba1c {tag}", encounter, when, "laboratory", "4548-4", "Hemoglobin A1c/Hemoglobin.total in Blood", 6.1, "%")
    for code, display in immunizations:
        add("Immunization", f"immunization {code} {tag}", {
            "status": "completed", "vaccineCode": {"coding": [{"system": CVX, "code": code, "display": display}], "text": display},
            "patient": {"reference": PATIENT}, "encounter": {"reference": encounter},
            "occurrenceDateTime": when, "primarySource": True,
        })
    for code, display, status, dose in medications:
        add("MedicationRequest", f"medication {code} {tag}", {
            "meta": {"profile": ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-medicationrequest"]},
            "status": status, "intent": "order",
            "category": [{"coding": [{"system": "http://terminology.hl7.org/CodeSystem/medicationrequest-category", "code": "community",
                                      "display": "Community"}], "text": "Community"}],
            "medicationCodeableConcept": concept(RXNORM, code, display),
            "subject": {"reference": PATIENT}, "encounter": {"reference": encounter},
            "authoredOn": when, "requester": PRACTITIONER,
            "dosageInstruction": [{"sequence": 1, "text": "Take one tablet by mouth once a day",
                                   "timing": {"repeat": {"frequency": 1, "period": 1.0, "periodUnit": "d"}}, "asNeededBoolean": False,
                                   "doseAndRate": [{"type": concept("http://terminology.hl7.org/CodeSystem/dose-rate-type", "ordered", "Ordered"),
                                                    "doseQuantity": {"value": dose}}]}],
        })
    for code, display in procedures:
        add("Procedure", f"procedure {code} {tag}", {
            "status": "completed", "code": concept(SNOMED, code, display),
            "subject": {"reference": PATIENT}, "encounter": {"reference": encounter},
            "performedPeriod": {"start": when, "end": end}, "location": {"display": ORGANIZATION["display"]},
        })
    if allergy:
        code, display, reaction_code, reaction = allergy
        add("AllergyIntolerance", f"allergy {code}", {
            "clinicalStatus": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical", "code": "active"}]},
            "verificationStatus": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/allergyintolerance-verification", "code": "confirmed"}]},
            "type": "allergy", "category": ["environment"], "criticality": "low",
            "code": concept(SNOMED, code, display),
            "patient": {"reference": PATIENT}, "recordedDate": when,
            "reaction": [{"manifestation": [concept(SNOMED, reaction_code, reaction)], "severity": "mild"}],
        })
    if lipid:
        results = [observation(f"lipid {code} {tag}", encounter, when, "laboratory", code, display, value, "mg/dL")
                   for code, display, value in [("2093-3", "Cholesterol [Mass/volume] in Serum or Plasma", 196.2),
                                                ("2571-8", "Triglycerides", 131.4),
                                                ("18262-6", "Low Density Lipoprotein Cholesterol", 112.9),
                                                ("2085-9", "High Density Lipoprotein Cholesterol", 57.0)]]
        add("DiagnosticReport", f"lipid panel {tag}", {
            "status": "final",
            "category": [{"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v2-0074", "code": "LAB", "display": "Laboratory"}]}],
            "code": concept(LOINC, "57698-3", "Lipid panel with direct LDL - Serum or Plasma"),
            "subject": {"reference": PATIENT}, "encounter": {"reference": encounter},
            "effectiveDateTime": when, "issued": when[:19] + ".512" + when[19:], "performer": [PRACTITIONER],
            "result": [{"reference": r, "display": "lipid result"} for r in results],
        })
    note = (f"\n{year}-05-14\n\n# Chief Complaint\nNo complaints.\n\n# History of Present Illness\nRosalind517\n is a {year - 1961} year-old "
            "non-hispanic white female.\n\n# Assessment and Plan\nPatient is presenting with "
            + (", ".join(d for _, d, _ in conditions) or "no new findings") + ".\n")
    data = base64.b64encode(note.encode()).decode()
    note_code = {"coding": [{"system": LOINC, "code": "34117-2", "display": "History and physical note"},
                            {"system": LOINC, "code": "51847-2", "display": "Evaluation+Plan note"}]}
    add("DiagnosticReport", f"note report {tag}", {
        "status": "final", "category": [note_code], "code": note_code,
        "subject": {"reference": PATIENT}, "encounter": {"reference": encounter},
        "effectiveDateTime": when, "issued": when[:19] + ".512" + when[19:], "performer": [PRACTITIONER],
        "presentedForm": [{"contentType": "text/plain; charset=utf-8", "data": data}],
    })
    add("DocumentReference", f"note document {tag}", {
        "status": "superseded",
        "type": {"coding": [{"system": LOINC, "code": "34117-2", "display": "History and physical note"}]},
        "category": [{"coding": [{"system": "http://hl7.org/fhir/us/core/CodeSystem/us-core-documentreference-category",
                                  "code": "clinical-note", "display": "Clinical Note"}]}],
        "subject": {"reference": PATIENT}, "date": when[:19] + ".512" + when[19:], "author": [PRACTITIONER], "custodian": ORGANIZATION,
        "content": [{"attachment": {"contentType": "text/plain; charset=utf-8", "data": data},
                     "format": {"system": "http://ihe.net/fhir/ValueSet/IHE.FormatCode.codesystem", "code": "urn:ihe:iti:xds:2017:mimeTypeSufficient",
                                "display": "mimeType Sufficient"}}],
        "context": {"encounter": [{"reference": encounter}], "period": {"start": when, "end": end}},
    })
    care_team = add("CareTeam", f"care team {tag}", {
        "status": "active", "subject": {"reference": PATIENT}, "encounter": {"reference": encounter}, "period": {"start": when},
        "participant": [{"role": [concept(SNOMED, "223366009", "Healthcare professional (occupation)")], "member": PRACTITIONER}],
        "managingOrganization": [ORGANIZATION],
    })
    if made:
        add("CarePlan", f"care plan {tag}", {
            "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">Care Plan for Lifestyle education regarding hypertension.</div>"},
            "status": "active", "intent": "order",
            "category": [{"coding": [{"system": "http://hl7.org/fhir/us/core/CodeSystem/careplan-category", "code": "assess-plan"}]}],
            "subject": {"reference": PATIENT}, "encounter": {"reference": encounter}, "period": {"start": when},
            "careTeam": [{"reference": care_team}], "addresses": [{"reference": r} for r in made],
            "activity": [{"detail": {"code": concept(SNOMED, "386463000", "Prescribed activity/exercise education"), "status": "in-progress"}}],
        })
    claim = add("Claim", f"claim {tag}", {
        "status": "active", "type": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/claim-type", "code": "professional"}]},
        "use": "claim", "patient": {"reference": PATIENT, "display": "Rosalind517 Okuneva707"},
        "billablePeriod": {"start": when, "end": end}, "created": end, "provider": ORGANIZATION,
        "priority": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/processpriority", "code": "normal"}]},
        "insurance": [{"sequence": 1, "focal": True, "coverage": {"display": "Blue Cross Blue Shield"}}],
        "item": [{"sequence": 1, "productOrService": concept(SNOMED, "162673000", "General examination of patient (procedure)"),
                  "encounter": [{"reference": encounter}]}],
        "total": {"value": 136.8, "currency": "USD"},
    })
    add("ExplanationOfBenefit", f"eob {tag}", {
        "status": "active", "type": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/claim-type", "code": "professional"}]},
        "use": "claim", "patient": {"reference": PATIENT}, "billablePeriod": {"start": when, "end": end}, "created": end,
        "insurer": {"display": "Blue Cross Blue Shield"}, "provider": PRACTITIONER, "claim": {"reference": claim}, "outcome": "complete",
        "insurance": [{"focal": True, "coverage": {"display": "Blue Cross Blue Shield"}}],
        "total": [{"category": concept("http://terminology.hl7.org/CodeSystem/adjudication", "submitted", "Submitted Amount"),
                   "amount": {"value": 136.8, "currency": "USD"}}],
        "payment": {"amount": {"value": 109.44, "currency": "USD"}},
    })


def main(output):
    patient()
    visit(2016, conditions=[("59621000", "Essential hypertension (disorder)", False)],
          immunizations=[("140", "Influenza, seasonal, injectable, preservative free")],
          medications=[("314076", "lisinopril 10 MG Oral Tablet", "active", 1)],
          procedures=[("430193006", "Medication reconciliation (procedure)")], lipid=True,
          allergy=("419474003", "Allergy to mould (finding)", "21626009", "Cutaneous hypersensitivity (finding)"))
    visit(2018, conditions=[("444814009", "Viral sinusitis (disorder)", True)],
          immunizations=[("140", "Influenza, seasonal, injectable, preservative free"), ("113", "Td (adult) preservative free")],
          medications=[("308182", "Amoxicillin 250 MG Oral Capsule", "stopped", 1)],
          procedures=[("710824005", "Assessment of health and social care needs (procedure)")])
    visit(2021, conditions=[("15777000", "Prediabetes (finding)", False)],
          immunizations=[("140", "Influenza, seasonal, injectable, preservative free"), ("208", "SARS-COV-2 (COVID-19) vaccine, mRNA, spike protein, LNP, preservative free, 30 mcg/0.3mL dose")],
          medications=[("860975", "24 HR metformin hydrochloride 500 MG Extended Release Oral Tablet", "active", 1)],
          procedures=[("430193006", "Medication reconciliation (procedure)"), ("171207006", "Depression screening (procedure)")], lipid=True)
    bundle = {"resourceType": "Bundle", "type": "transaction", "entry": entries}
    with open(output, "w", encoding="utf-8") as handle:
        json.dump(bundle, handle, indent=2)
        handle.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "synthea-shaped-patient.json"))
