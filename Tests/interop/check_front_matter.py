#!/usr/bin/env python3
"""Independent check of the mounted view with PyYAML (another YAML implementation than binder's).

usage: check_front_matter.py MOUNT MANIFEST
For every document of the manifest shown as markdown, the front matter must load (yaml.safe_load)
to exactly the document's metadata and the body must equal its value byte for byte.
Prints 'N passed, M failed'.
"""
import json
import os
import sys

import yaml


def split(data: bytes):
    assert data.startswith(b"---\n"), "no front matter"
    end = data.index(b"\n---\n", 3)
    return data[4:end + 1], data[end + 5:]


def main(mount, manifest_path):
    manifest = json.load(open(manifest_path, encoding="utf-8"))
    passed = failed = 0

    def check(view_path, doc):
        nonlocal passed, failed
        try:
            with open(os.path.join(mount, view_path), "rb") as f:
                data = f.read()
            head, body = split(data)
            metadata = yaml.safe_load(head.decode("utf-8")) or {}
            assert metadata == doc["metadata"], f"metadata {metadata!r} != {doc['metadata']!r}"
            assert list(metadata.keys()) == list(doc["metadata"].keys()), "key order"
            assert body == doc["value"].encode("utf-8"), "value differs"
            passed += 1
        except Exception as e:  # noqa: BLE001 - report every failure
            failed += 1
            print(f"FAIL {view_path}: {e}", file=sys.stderr)

    def walk_children(children, directory):
        for i, child in enumerate(children):
            kind = child["metadata"].get("type", "note")
            if kind in ("attachment", "attachment_ref"):
                continue
            base = f"{i + 1:02d}-{kind.replace('_', '-')}"
            check(f"{directory}/{base}.md", child)
            walk_children(child.get("children", []), f"{directory}/{base}.children")

    for path, entry in manifest["documents"].items():
        doc = entry["json"]
        if doc["metadata"].get("type") == "attachment_ref":
            continue
        stem = path[: -len(".json")]
        check(stem + ".md", doc)
        walk_children(doc.get("children", []), stem + ".children")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
