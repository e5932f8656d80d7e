#!/usr/bin/env python3
"""Lists the coded items of a C-CDA document, independently of binder (Python's ElementTree):
for each structured section binder maps, the codes of its entries that state a fact (not
negated, mood EVN), as JSON {folder: [[system OID, code], ...]}. ImportCommandTests checks that
each appears in a record of that folder after `binder import`."""
import json
import sys
import xml.etree.ElementTree as ET

V3 = "{urn:hl7-org:v3}"
XSI_TYPE = "{http://www.w3.org/2001/XMLSchema-instance}type"
# LOINC section codes -> folder (C-CDA R2.1).
SECTIONS = {"11450-4": "conditions", "11535-2": "conditions", "46241-6": "conditions",
            "10160-0": "medications", "10183-2": "medications", "48765-2": "allergies",
            "11369-6": "immunizations", "30954-2": "labs", "8716-3": "labs",
            "47519-4": "procedures", "46240-8": "visits"}


def coded(element):
    if element is None or element.get("nullFlavor") or not element.get("code") or not element.get("codeSystem"):
        return None
    return [element.get("codeSystem"), element.get("code")]


def states_a_fact(element):
    return element.get("negationInd") != "true" and element.get("moodCode", "EVN") == "EVN"


def items(folder, entry):
    """The code of each item an entry holds, as binder's folder would show it."""
    found = []
    for act in entry:
        if folder in ("conditions", "allergies"):
            template = "2.16.840.1.113883.10.20.22.4.4" if folder == "conditions" else "2.16.840.1.113883.10.20.22.4.7"
            observations = [r.find(V3 + "observation") for r in act.findall(V3 + "entryRelationship")]
            observations = [o for o in observations if o is not None]
            chosen = [o for o in observations if any(t.get("root") == template for t in o.findall(V3 + "templateId"))] or observations
            for o in chosen:
                if not states_a_fact(o):
                    continue
                if folder == "conditions":
                    found.append(coded(o.find(V3 + "value")))
                else:
                    found.append(coded(o.find(f"{V3}participant/{V3}participantRole/{V3}playingEntity/{V3}code")))
        elif folder in ("medications", "immunizations"):
            # A discharge medication act wraps its substance administrations.
            wrapped = [r.find(V3 + "substanceAdministration") for r in act.findall(V3 + "entryRelationship")] if act.tag == V3 + "act" else [act]
            for administration in [w for w in wrapped if w is not None]:
                if states_a_fact(administration):
                    found.append(coded(administration.find(f"{V3}consumable/{V3}manufacturedProduct/{V3}manufacturedMaterial/{V3}code")))
        elif folder == "labs":
            # A panel is one record: its own code (an organizer's) stands for it.
            found.append(coded(act.find(V3 + "code")))
        elif states_a_fact(act):
            found.append(coded(act.find(V3 + "code")))
    return [f for f in found if f]


def main(path):
    root = ET.parse(path).getroot()
    result = {}
    for section in root.iter(V3 + "section"):
        code = section.find(V3 + "code")
        folder = SECTIONS.get(code.get("code") if code is not None else None)
        if not folder:
            continue
        for entry in section.findall(V3 + "entry"):
            result.setdefault(folder, []).extend(items(folder, entry))
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
