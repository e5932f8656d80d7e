#!/usr/bin/env python3
"""Independent checks of `binder export` output (ExportTests).

    check_export.py pdf FILE MANIFEST    poppler's pdftotext/pdfinfo/pdfimages: every record's text
    check_export.py html FILE MANIFEST   Python's html.parser: every record, images, nothing active
    check_export.py fhir FILE            fhir.resources (R4B models, R4's technical correction)

Each prints one JSON object on stdout; `missing` lists expected text that was not found.
The expected text is worked out from the fixture's manifest here, not by binder.
"""
import json
import re
import subprocess
import sys
from html.parser import HTMLParser


def records(manifest_path):
    """(view path, title, [text fragments]) for every record of the manifest but patient-info."""
    manifest = json.load(open(manifest_path, encoding="utf-8"))
    out = []
    for path, entry in sorted(manifest["documents"].items()):
        if path == "patient-info.json":
            continue
        doc = entry["json"]
        folder = path.rsplit("/", 1)[0] if "/" in path else ""
        if doc["metadata"].get("type") == "attachment_ref":
            name = doc["value"][:-4]
            if "." not in name:
                fmt = doc["metadata"].get("format", "bin")
                name += "." + ("jpg" if fmt == "jpeg" else fmt)
            out.append((folder + "/" + name, name, []))
            continue
        title, fragments = split(doc["value"])
        fragments += child_fragments(doc.get("children", []))
        out.append((path[:-5] + ".md", title, fragments))
    return out


def split(markdown):
    lines = markdown.split("\n")
    title = None
    first = next((i for i, l in enumerate(lines) if l.strip()), None)
    if first is not None and re.match(r"^#{1,6} ", lines[first]):
        title = re.sub(r"^#{1,6} ", "", lines[first]).strip()
        lines = lines[first + 1:]
    return title, fragments_of(lines)


def fragments_of(lines):
    fragments = []
    for line in lines:
        line = line.strip()
        if not line or re.match(r"^\|?[\s:|-]+\|?$", line):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")] if line.startswith("|") else [line]
        for cell in cells:
            cell = re.sub(r"^(#{1,6} |[-*+] |\d+\. |> )", "", cell)
            cell = re.sub(r"[*_`]", "", cell).strip()
            if cell:
                fragments.append(cell)
    return fragments


def child_fragments(children):
    out = []
    for child in children:
        if child["metadata"].get("type") in ("attachment", "attachment_ref"):
            continue
        title, fragments = split(child["value"])
        out += ([title] if title else []) + fragments + child_fragments(child.get("children", []))
    return out


def normalize(text):
    return re.sub(r"\s+", " ", text).strip()


def check_pdf(path, manifest):
    text = normalize(subprocess.run(["pdftotext", "-enc", "UTF-8", path, "-"], capture_output=True, check=True,
                                    text=True).stdout)
    info = subprocess.run(["pdfinfo", path], capture_output=True, check=True, text=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    title = (re.search(r"^Title:\s+(.*)$", info, re.M) or [None, ""])[1]
    listing = subprocess.run(["pdfimages", "-list", path], capture_output=True, check=True, text=True).stdout
    rows = [l.split() for l in listing.splitlines()[2:] if l.strip()]
    images = [r for r in rows if len(r) > 2 and r[2] == "image"]
    missing = []
    for view_path, record_title, fragments in records(manifest):
        for fragment in ([record_title] if record_title else []) + fragments:
            if normalize(fragment) not in text:
                missing.append(f"{view_path}: {fragment}")
    # Each page's footer: the patient's name (from the manifest), then "Page N of M".
    name = re.match(r"# (.*)", json.load(open(manifest, encoding="utf-8"))["documents"]["patient-info.json"]["json"]["value"]).group(1)
    footer = len(re.findall(re.escape(name) + r" Page \d+ of %d" % pages, text))
    print(json.dumps({"pages": pages, "title": title, "images": len(images),
                      "encodings": sorted({r[8] for r in images if len(r) > 8}), "footers": footer,
                      "missing": missing}, ensure_ascii=False))


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.records = []        # data-path of article.record
        self.children = 0
        self.titles = {}
        self.images = []
        self.active = []         # script elements, on* attributes, javascript: links
        self.text = []
        self._title_of = None
        self._stack = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script" or tag in ("iframe", "object", "embed"):
            self.active.append(tag)
        for name, value in attrs.items():
            if name.startswith("on"):
                self.active.append(f"{tag}[{name}]")
            if name in ("href", "src") and value and value.strip().lower().startswith(("javascript:", "vbscript:")):
                self.active.append(f"{tag}[{name}={value}]")
            if name == "src" and value and not value.startswith("data:"):
                self.active.append(f"{tag}[src not data:]")
        classes = (attrs.get("class") or "").split()
        if tag == "article" and "record" in classes:
            self.records.append(attrs.get("data-path"))
        if tag == "article" and "child" in classes:
            self.children += 1
        if tag in ("h3",) and "title" in classes and self.records:
            self._title_of = self.records[-1]
            self.titles[self._title_of] = ""
        if tag == "img":
            self.images.append((attrs.get("src") or "")[:22])

    def handle_endtag(self, tag):
        if tag == "h3":
            self._title_of = None

    def handle_data(self, data):
        self.text.append(data)
        if self._title_of:
            self.titles[self._title_of] += data


def check_html(path, manifest):
    page = Page()
    page.feed(open(path, encoding="utf-8").read())
    page.close()
    text = normalize(" ".join(page.text))
    missing = []
    expected = records(manifest)
    for view_path, title, fragments in expected:
        if view_path not in page.records:
            missing.append(f"{view_path}: no article")
            continue
        if title and normalize(page.titles.get(view_path, "")) != normalize(title):
            missing.append(f"{view_path}: title {page.titles.get(view_path)!r}")
        for fragment in fragments:
            if normalize(fragment) not in text:
                missing.append(f"{view_path}: {fragment}")
    print(json.dumps({"records": len(page.records), "expected": len(expected), "children": page.children,
                      "images": page.images, "active": page.active, "missing": missing}, ensure_ascii=False))


def check_fhir(path):
    from fhir.resources.R4B.bundle import Bundle
    data = open(path, encoding="utf-8").read()
    bundle = Bundle.model_validate_json(data) if hasattr(Bundle, "model_validate_json") else Bundle.parse_raw(data)
    raw = json.loads(data)
    kinds = {}
    for entry in raw["entry"]:
        kind = entry["resource"]["resourceType"]
        kinds[kind] = kinds.get(kind, 0) + 1
    composition = raw["entry"][0]["resource"]
    print(json.dumps({"type": bundle.type, "resources": kinds, "first": composition["resourceType"],
                      "sections": [s["title"] for s in composition.get("section", [])],
                      "patient": [e["resource"] for e in raw["entry"] if e["resource"]["resourceType"] == "Patient"][0]},
                     ensure_ascii=False))


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "pdf":
        check_pdf(sys.argv[2], sys.argv[3])
    elif kind == "html":
        check_html(sys.argv[2], sys.argv[3])
    elif kind == "fhir":
        check_fhir(sys.argv[2])
    else:
        sys.exit("usage: check_export.py pdf|html FILE MANIFEST | fhir FILE")
