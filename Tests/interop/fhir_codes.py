#!/usr/bin/env python3
"""Lists the coded items of a FHIR R4 source, independently of binder, and finds them in a binder.

    fhir_codes.py list SOURCE              {folder: [[system, code], ...]} of the source
    fhir_codes.py check SOURCE REPO NSEC   {"expected": n, "missing": [[folder, system, code], ...],
                                            "records": {folder: count}}

SOURCE is a FHIR JSON file (a Bundle, one resource, NDJSON) or a SMART Health Card file (its JWS
payloads inflated with zlib and read here). The folders are those issue 41 names for each
resource type: Condition -> conditions, MedicationStatement/MedicationRequest -> medications
(`medicationReference` resolved in the bundle), AllergyIntolerance -> allergies, Immunization ->
immunizations, Observation and DiagnosticReport -> labs (a panel's members and an observation's
components are rows of the panel's record, so their codes are expected there too), Procedure ->
procedures, Encounter -> visits, Coverage -> insurance. Items that state nothing happened
(refuted, entered in error, not done, planned) or that there is nothing to list (SNOMED CT's
"no known allergy", the IPS absent/unknown codes) are not expected. `check` reads the binder with
read_binder.py (rust-nostr and `cryptography`, not binder) and looks for each code in the
`codes` front matter of the records of its folder. ImportSampleTests runs it after `binder import`.
"""
import base64
import json
import os
import sys
import zlib

FOLDERS = {"Condition": "conditions", "MedicationStatement": "medications", "MedicationRequest": "medications",
           "AllergyIntolerance": "allergies", "Immunization": "immunizations", "Observation": "labs",
           "DiagnosticReport": "labs", "Procedure": "procedures", "Encounter": "visits", "Coverage": "insurance"}
# SNOMED CT's "no known allergy" concepts: a statement that there is none, not an allergy.
NO_KNOWN_ALLERGY = {"716186003", "409137002", "428607008", "429625007", "428197003"}
# The International Patient Summary's codes for "nothing to list" (no-allergy-info, no-known-problems…).
ABSENT_OR_UNKNOWN = "http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips"


def resources_of(path):
    raw = open(path, "rb").read()
    text = raw.decode("utf-8")
    try:
        top = [json.loads(text)]
    except json.JSONDecodeError:
        top = [json.loads(line) for line in text.splitlines() if line.strip()]
    out = []
    for item in top:
        if "verifiableCredential" in item:
            for jws in item["verifiableCredential"]:
                payload = jws.split(".")[1]
                inflated = zlib.decompress(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)), -15)
                out += resources_of_json(json.loads(inflated)["vc"]["credentialSubject"]["fhirBundle"])
        else:
            out += resources_of_json(item)
    return out


def resources_of_json(item):
    """(fullUrl or None, resource) for a Bundle's entries, else the resource itself."""
    if item.get("resourceType") == "Bundle":
        return [(e.get("fullUrl"), e["resource"]) for e in item.get("entry", []) if "resource" in e]
    return [(None, item)]


def codings(concept):
    return [(c["system"], c["code"]) for c in (concept or {}).get("coding", []) if c.get("system") and c.get("code")]


def status_code(concept):
    return next((c.get("code") for c in (concept or {}).get("coding", [])), None)


def states_a_fact(resource):
    status = resource.get("status")
    if status in ("entered-in-error", "not-done", "preparation", "not-taken", "intended"):
        return False
    if status_code(resource.get("verificationStatus")) in ("refuted", "entered-in-error"):
        return False
    if resource.get("intent") in ("plan", "proposal"):
        return False
    return True


def listed(path):
    pairs = resources_of(path)
    by_reference = {}
    for url, resource in pairs:
        if url:
            by_reference[url] = resource
        if resource.get("id"):
            by_reference[resource["resourceType"] + "/" + resource["id"]] = resource
    result = {}
    for _, resource in pairs:
        kind = resource.get("resourceType")
        folder = FOLDERS.get(kind)
        if folder is None or not states_a_fact(resource):
            continue
        if kind in ("MedicationStatement", "MedicationRequest"):
            medication = resource.get("medicationCodeableConcept")
            if medication is None:
                medication = by_reference.get((resource.get("medicationReference") or {}).get("reference"), {}).get("code")
            codes = codings(medication)
        elif kind == "AllergyIntolerance":
            codes = codings(resource.get("code"))
            if any(s == "http://snomed.info/sct" and c in NO_KNOWN_ALLERGY for s, c in codes):
                continue
        elif kind == "Immunization":
            codes = codings(resource.get("vaccineCode"))
        elif kind == "Encounter":
            codes = codings((resource.get("type") or [{}])[0])
        elif kind == "Coverage":
            codes = codings(resource.get("type"))
        else:
            codes = codings(resource.get("code"))
            for component in resource.get("component", []):
                codes += codings(component.get("code"))
        if any(system == ABSENT_OR_UNKNOWN for system, _ in codes):
            continue
        if kind == "DiagnosticReport":
            categories = [c for concept in resource.get("category", []) for _, c in codings(concept)]
            if "RAD" in categories or "LP29684-5" in categories:
                folder = "imaging"
        for system, code in codes:
            if [system, code] not in result.setdefault(folder, []):
                result[folder].append([system, code])
    return result


def check(source, repo, nsec_file):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import nostr_sdk as n
    import read_binder
    keys = n.Keys(n.SecretKey.parse(open(nsec_file, encoding="utf-8").read().strip()))
    documents = read_binder.read(repo, keys)["documents"]
    stored, records = {}, {}
    for path, document in documents.items():
        if "/" not in path:
            continue
        folder = path.split("/")[0]
        records[folder] = records.get(folder, 0) + 1
        for code in document.get("metadata", {}).get("codes", []) or []:
            stored.setdefault(folder, set()).add((code.get("system"), code.get("code")))
    expected = listed(source)
    missing = [[folder, s, c] for folder, codes in sorted(expected.items()) for s, c in codes if (s, c) not in stored.get(folder, set())]
    return {"expected": sum(len(v) for v in expected.values()), "missing": missing, "records": records}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "list":
        print(json.dumps(listed(sys.argv[2])))
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        print(json.dumps(check(sys.argv[2], sys.argv[3], sys.argv[4])))
    else:
        sys.exit("usage: fhir_codes.py list SOURCE | check SOURCE REPO NSEC")
