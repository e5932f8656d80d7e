#!/usr/bin/env python3
"""Writes the seed corpora in Tests/Fuzz/corpus/ from the shared test vectors (and a few
hand-written documents with invented content). Run from the repository root; `scripts/fuzz
--merge` later adds what fuzzing discovers. Input layouts are described in Tests/Fuzz/binder-fuzz."""
import base64, gzip, hashlib, hmac, json, os, struct, zlib
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

root = os.path.join("Tests", "Fuzz", "corpus")
vectors = os.path.join("Tests", "BinderCryptoTests", "Fixtures")
nip44 = json.load(open(os.path.join(vectors, "nip44.vectors.json")))["v2"]
nip49 = json.load(open(os.path.join(vectors, "nip49.vectors.json")))
nip01 = json.load(open(os.path.join(vectors, "nip01-event-ids.json")))

# Must match CryptoTargets.keys.
keys = ["c41c775356fd92eadc63ff5a0dc1da211b268cbea22316767095b2871ea1412d",
        "3e2b52a63be47d34fe0a80e34e73d436d6963bc8f39827f327057a9986c20a45",
        "d5a2f879123145a4b291d767428870f5a8d9e5007193321795b40183d4ab8c2b",
        "3b15c977e20bfe4b8482991274635edd94f366595b1a3d2993515705ca3cedb8",
        "4f1538411098cf11c8af216836444787c462d47f97287f46cf7edb2c4915b8a5",
        "75fe686d21a035f0c7cd70da64ba307936e5ca0b20710496a6b6b5f573377bdd"]


def write(target, name, data):
    os.makedirs(os.path.join(root, target), exist_ok=True)
    with open(os.path.join(root, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def padded_len(n):
    if n <= 32:
        return 32
    nxt = 1 << (n - 1).bit_length()
    chunk = 32 if nxt <= 256 else nxt // 8
    return chunk * ((n - 1) // chunk + 1)


def nip44_encrypt(conversation_key, plaintext, nonce):
    okm = b""
    prev = b""
    for i in range(1, 4):
        prev = hmac.new(conversation_key, prev + nonce + bytes([i]), hashlib.sha256).digest()
        okm += prev
    chacha_key, chacha_nonce, hmac_key = okm[0:32], okm[32:44], okm[44:76]
    padded = struct.pack(">H", len(plaintext)) + plaintext + b"\0" * (padded_len(len(plaintext)) - len(plaintext))
    enc = Cipher(algorithms.ChaCha20(chacha_key, b"\0\0\0\0" + chacha_nonce), None).encryptor()
    ciphertext = enc.update(padded)
    mac = hmac.new(hmac_key, nonce + ciphertext, hashlib.sha256).digest()
    return base64.b64encode(b"\x02" + nonce + ciphertext + mac)


CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def bech32_encode(hrp, data):
    acc, bits, words = 0, 0, []
    for b in data:
        acc = (acc << 8) | b
        bits += 8
        while bits >= 5:
            bits -= 5
            words.append((acc >> bits) & 31)
    if bits:
        words.append((acc << (5 - bits)) & 31)
    values = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp] + words + [0] * 6
    gen = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3]
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1ffffff) << 5 ^ v
        for i in range(5):
            if (top >> i) & 1:
                chk ^= gen[i]
    mod = chk ^ 1
    return hrp + "1" + "".join(CHARSET[w] for w in words + [(mod >> 5 * (5 - i)) & 31 for i in range(6)])


# nip44: mode 0 (payload), 1 (padded plaintext to seal), 2 (plaintext round trip); byte 2 picks the key.
for i, v in enumerate(nip44["valid"]["encrypt_decrypt"]):
    write("nip44", f"valid-{i}", bytes([0, keys.index(v["conversation_key"])]) + v["payload"].encode())
for i, v in enumerate(nip44["invalid"]["decrypt"]):
    k = keys.index(v["conversation_key"]) if v["conversation_key"] in keys else 0
    write("nip44", f"invalid-{i}", bytes([0, k]) + v["payload"].encode())
for n in (1, 32, 33, 300):
    text = b"a" * n
    write("nip44", f"padded-{n}", bytes([1, 0]) + struct.pack(">H", n) + text + b"\0" * (padded_len(n) - n))
    write("nip44", f"plain-{n}", bytes([2, 0]) + text)

# nip49: mode 0 (ncryptsec), 1 (secret key to seal).
for i, v in enumerate(nip49["decrypt"]):
    write("nip49", f"ncryptsec-{i}", b"\0" + v["ncryptsec"].encode())
    write("nip49", f"key-{i}", b"\1" + bytes.fromhex(v["secret_key_hex"]))

# bech32: mode 0 (text), 1 (bytes to encode), 2 (hex).
event = nip01["events"][0]
write("bech32", "npub", b"\0" + bech32_encode("npub", bytes.fromhex(event["pubkey"])).encode())
write("bech32", "nsec", b"\0" + bech32_encode("nsec", bytes(range(1, 33))).encode())
write("bech32", "ncryptsec", b"\0" + nip49["decrypt"][0]["ncryptsec"].encode())
write("bech32", "bytes", b"\1" + bytes(range(40)))
write("bech32", "hex", b"\2" + event["pubkey"].encode())

# sidecar: mode 0 (file), 1/2 (text to seal as DEK/legacy), 3 (inline value), 4 (content round trip).
key0 = bytes.fromhex(keys[0])
content = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
text = base64.b64encode(content)
dek = bytes(range(32))
wrapped = nip44_encrypt(key0, dek.hex().encode(), bytes(32))
nonce = bytes(range(12))
dek_file = b"\x02" + struct.pack(">H", len(wrapped)) + wrapped + nonce + ChaCha20Poly1305(dek).encrypt(nonce, text, None)
write("sidecar", "dek", bytes([0, 0]) + dek_file)
legacy_nonce = bytes(32)
okm, prev = b"", b""
for i in range(1, 4):
    prev = hmac.new(key0, prev + legacy_nonce + bytes([i]), hashlib.sha256).digest()
    okm += prev
enc = Cipher(algorithms.ChaCha20(okm[0:32], b"\0\0\0\0" + okm[32:44]), None).encryptor()
body = legacy_nonce + enc.update(text)
write("sidecar", "legacy", bytes([0, 0]) + base64.b64encode(b"\xff" + body + hmac.new(okm[44:76], body, hashlib.sha256).digest()))
write("sidecar", "text", bytes([1, 0]) + text)
write("sidecar", "text-wrapped", bytes([1, 0]) + base64.encodebytes(content))
write("sidecar", "legacy-text", bytes([2, 0]) + text)
write("sidecar", "inline", bytes([3, 0]) + text)
write("sidecar", "content", bytes([4, 0]) + content)

# nostr-event: login events as JSON.
for i, e in enumerate(nip01["events"]):
    e = dict(e)
    e["sig"] = e.pop("sig_example", "")
    write("nostr-event", f"event-{i}", json.dumps(e, separators=(",", ":"), ensure_ascii=False))

# json, document, front-matter: invented records in the apps' shapes.
documents = [
    {"value": "# Annual visit\n\nBlood pressure normal. Follow up in **one year**.\n",
     "metadata": {"type": "visit", "created": "2026-02-09T14:30:00.000Z", "updated": "2026-02-09T14:30:00.000Z",
                  "provider": "Dr. Example", "npi": "0123456789", "tags": ["annual", "bp"]},
     "children": [{"value": "Follow-up call.", "metadata": {"type": "note", "created": "2026-02-10T09:00:00.000Z"},
                   "children": []}],
     "renderer": "markdown", "editor": {"version": 2}},
    {"value": "photo.jpg.enc", "metadata": {"type": "attachment_ref", "format": "jpeg", "encoding": "base64",
     "originalSizeBytes": 123456, "created": "2026-01-01T00:00:00.000Z"}, "children": []},
    {"value": "aGVsbG8=", "metadata": {"type": "attachment", "format": "png", "created": "2020-05-15"}},
    {"value": "Ünïcødé ✓ 🩺 \"quoted\" \\ back\tslash\u0001", "metadata": {"type": "lab", "created": "2026-02-09T14:30:00Z",
     "results": [{"name": "HbA1c", "value": 5.4, "unit": "%"}, {"name": "LDL", "value": 1.50e2, "flag": None}],
     "displayOrder": 3, "durationMs": -0.5e-3, "empty": {}, "list": [], "yes": True, "no": False}},
]
for i, d in enumerate(documents):
    text = json.dumps(d, separators=(",", ":"), ensure_ascii=False)
    write("json", f"document-{i}", text)
    write("document", f"document-{i}", text)
write("json", "pretty", json.dumps(documents[0], indent=2))
write("json", "escapes", '["\\ud83e\\ude7a","\\ud800","\\u00e9",1e-7,-0,0.5E+3,null]')

front_matter = [
    "---\ntype: visit\ncreated: \"2026-02-09T14:30:00.000Z\"\nnpi: \"0123456789\"\ntags: [annual, bp]\n---\n# Visit\n\nText.\n",
    "---\r\ntype: note\r\nlist:\r\n  - a\r\n  - {b: 1}\r\n---\r\nbody\r\n",
    "---\nbase: &b {x: 1, y: [1, 2]}\nother:\n  <<: *b\n  z: |\n    multi\n    line\n---\n",
    "---\n---\nonly a value\n",
    "no front matter at all\n",
    "---\ntype: lab\nvalue: 1.50\nflag: ~\nok: true\nweird: 0x1F\ndate: 2026-02-09\n\"\\uFEFFkey\": \"\\U0001F600\"\n---\n---\nnested\n---\n",
]
for i, text in enumerate(front_matter):
    write("front-matter", f"file-{i}", text)
# Nesting at the limits (511 levels of metadata are kept, 512 refused; 512 levels of JSON).
write("front-matter", "deep-510", "---\nx: " + "[" * 510 + "]" * 510 + "\n---\n")
write("front-matter", "deep-511", "---\nx: " + "[" * 511 + "]" * 511 + "\n---\n")
write("document", "deep-children", '{"value":"","metadata":{"type":"x"},"children":[' * 255 + "]}" * 255)
write("json", "deep-512", "[" * 512 + "]" * 512)

# timestamps: mode 0 (text), 1 (12 bytes: seconds, nanoseconds; big endian).
for i, text in enumerate(["2026-02-09T14:30:00.000Z", "2020-05-15", "2026-02-09 14:30+02:00", "1999-12-31t23:59:59.123456789z",
                          "2026-02-09T14:30:00,5-0530", "+010000-01-01T00:00:00.000Z", "-000001-12-31T23:59:59.999Z"]):
    write("timestamps", f"text-{i}", b"\0" + text.encode())
write("timestamps", "time-now", b"\1" + struct.pack(">qi", 1_763_767_000, 123_456_789))
write("timestamps", "time-min", b"\1" + struct.pack(">qi", -(2 ** 63), -1))
write("timestamps", "time-max", b"\1" + struct.pack(">qi", 2 ** 63 - 1, 2 ** 31 - 1))

# server-request: the first byte picks the decoder: 0 a repository id, 1 the start of a
# receive-pack body, 2 a request body (then 0: gzip, 1: deflate), 3 a forwarding header's
# lines (then 0: X-Forwarded-For, 1: Forwarded).
for i, lines in enumerate([b"\0198.51.100.7", b"\0" + b"1.2.3.4, 198.51.100.7\n10.0.0.1", b"\0[2001:db8::1]:443, fd00::5",
                           b"\0unknown, 127.0.0.2", b"\0,,,", b"\1for=1.2.3.4, for=\"[2001:db8:cafe::17]:4711\";proto=https",
                           b"\1for=_hidden;by=x, for=\"", b"\1proto=https"]):
    write("server-request", f"forwarded-{i}", b"\3" + lines)
for i, repo in enumerate(["binder-1739999999999", "scan-0a1b", "-upload", "ARepo", "%61", "a..b", "x.git"]):
    write("server-request", f"id-{i}", b"\0" + repo.encode())


def pkt(text):
    return b"%04x" % (len(text) + 4) + text


zero, one = b"0" * 40, b"1" * 40
create = pkt(zero + b" " + one + b" refs/heads/main\0report-status side-band-64k\n") + b"0000"
pack = b"PACK" + struct.pack(">II", 2, 3)
write("server-request", "push-create", b"\1" + create + pack)
write("server-request", "push-options", b"\1" + pkt(zero + b" " + one + b" refs/heads/main\0push-options\n") + b"0000"
      + pkt(b"ci.skip\n") + b"0000" + pack)
write("server-request", "push-empty", b"\1")
write("server-request", "push-no-pack", b"\1" + create)
two = b"2" * 40
write("server-request", "upload-clone", b"\1" + pkt(b"want " + one + b" multi_ack_detailed side-band-64k thin-pack ofs-delta agent=git/2\n")
      + pkt(b"want " + two + b"\n") + b"0000" + pkt(b"done\n"))
write("server-request", "upload-round", b"\1" + pkt(b"want " + one + b" multi_ack_detailed\n") + b"0000"
      + pkt(b"have " + two + b"\n") * 3 + b"0000")
write("server-request", "upload-shallow", b"\1" + pkt(b"want " + one + b" side-band\n") + pkt(b"deepen 1\n") + pkt(b"shallow " + two + b"\n")
      + b"0000" + pkt(b"done\n"))
write("server-request", "gzip-zeros", b"\2\0" + gzip.compress(bytes(1 << 20)))
write("server-request", "deflate-text", b"\2\1" + zlib.compress(b"0000" * 64))

# pushed-tree: a pushed tree's raw bytes, as git's fsck rules read them.
for i, entries in enumerate([[(b"100644", b"a.json"), (b"40000", b"b")], [(b"40000", b".git")], [(b"100644", b"b"), (b"100644", b"a")],
                             [(b"040000", b"x")], [(b"100644", b"a"), (b"100644", b"a.c"), (b"40000", b"a")], [(b"100644", b"")]]):
    write("pushed-tree", f"tree-{i}", b"".join(mode + b" " + name + b"\0" + hashlib.sha1(name).digest() for mode, name in entries))
write("pushed-tree", "truncated", b"100644 a\0" + bytes(7))

# pushed-pack: a read size byte, then a pack (made by git: a blob, a tree, a commit, a delta).
def git_pack(files):
    import subprocess, tempfile
    with tempfile.TemporaryDirectory() as work:
        run = lambda *a: subprocess.run(["git", "-C", work, "-c", "user.name=t", "-c", "user.email=t@t", *a], check=True,
                                        capture_output=True, env={**os.environ, "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
                                                                   "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}).stdout
        run("init", "-q")
        for i, text in enumerate(files):
            with open(os.path.join(work, "f.txt"), "w") as f:
                f.write(text)
            run("add", "-A")
            run("commit", "-qm", f"c{i}")
        return subprocess.run(["git", "-C", work, "pack-objects", "--stdout", "--revs", "-q"], input=b"HEAD\n",
                              capture_output=True, check=True).stdout
pack = git_pack(["line\n" * 2000, "line\n" * 1999 + "changed\n"])
write("pushed-pack", "two-commits", b"\x06" + pack)
write("pushed-pack", "one-byte-reads", b"\x00" + pack)
write("pushed-pack", "truncated", b"\xff" + pack[:len(pack) // 2])
write("pushed-pack", "zeros-declared-large", b"\x40" + b"PACK" + struct.pack(">II", 2, 1) + bytes([0xb0, 0x80, 0x80, 0x80, 0x01]) + zlib.compress(b""))

# tree-delta: two bytes (where the base ends), the base tree's bytes, the target tree's.
def tree(entries):
    return b"".join(mode + b" " + name + b"\0" + hashlib.sha1(name + salt).digest() for mode, name, salt in entries)


records = [(b"100644", b"2024-%02d-visit.md" % i, b"") for i in range(40)]
base = tree(records)
changed = tree(records[:7] + [(b"100644", records[7][1], b"new")] + records[8:] + [(b"40000", b"z", b"")])
write("tree-delta", "one-changed", struct.pack(">H", len(base)) + base + changed)
folder = tree([(b"40000", b"a", b"")])
write("tree-delta", "folder-and-file", struct.pack(">H", len(folder)) + folder + tree([(b"100644", b"a.b", b""), (b"40000", b"a", b"")]))
write("tree-delta", "unrelated", struct.pack(">H", 23) + tree([(b"100644", b"x", b"")]) + tree([(b"100644", b"y", b"1"), (b"100644", b"w", b"")]))

# import-request: binder import's request to a mount (ImportRequest: the JSON's length in 8 bytes,
# the JSON, then the bytes fields raw, each [offset, count] in the JSON), and the outcome it answers.
def wire(value):
    blobs = bytearray()
    def walk(item):
        if isinstance(item, bytes):
            offset = len(blobs)
            blobs.extend(item)
            return [offset, len(item)]
        if isinstance(item, dict):
            return {key: walk(entry) for key, entry in item.items()}
        if isinstance(item, list):
            return [walk(entry) for entry in item]
        return item
    text = json.dumps(walk(value), separators=(",", ":")).encode()
    return struct.pack(">Q", len(text)) + text + bytes(blobs)


origin = {"organisation": "Good Health Clinic", "format": "C-CDA", "importDate": "2026-12-06", "documentDate": "2024-10-15"}
record = {"folder": "conditions", "title": "Asthma", "created": "2005-01-01", "updated": "2005-01-02T00:00:00.000Z", "body": "- Status: active\n",
          "codes": [["http://snomed.info/sct", "195967001", "Asthma"], ["http://hl7.org/fhir/sid/icd-10-cm", "J45"]],
          "status": "active", "source": origin, "attachments": [{"fileName": "scan.pdf", "format": "pdf", "bytes": b"%PDF-1.4\n%%EOF\n"}],
          "frontMatter": '{"tags":["lungs"],"codes":[{"system":"s","code":"1"}]}'}
source = {"file": "ccd.xml", "format": "C-CDA", "bytes": b"<ClinicalDocument/>", "keptExtension": "xml", "title": "Continuity of Care Document",
          "organisation": "Good Health Clinic", "created": "2024-10-15", "patientName": "Mei-Ling Chen", "patientBirthDate": "1985-02-14",
          "records": [record, dict(record, folder="medications", title="Metoprolol", preferredPath="medications/metoprolol.md")],
          "skipped": [{"file": "ccd.xml", "what": "Lisinopril", "reason": "planned"}], "narrative": [{"title": "Plan", "text": "Walk daily."}],
          "source": origin, "keepsSource": True, "signature": "not checked"}
request = {"sources": [source], "documentsFolder": "documents", "importDate": "2026-12-06", "now": 1780000000, "force": False, "dryRun": True}
write("import-request", "request", wire(request))
write("import-request", "request-folder-out", wire(dict(request, sources=[dict(source, records=[dict(record, folder="../x")])])))
write("import-request", "request-bytes-out", wire(request)[:-4])
write("import-request", "outcome", wire({"commit": "0" * 40, "created": [{"gitPath": "conditions/a.json", "attachments": ["a.pdf"]}],
                                         "updated": ["patient-info.json"], "unchanged": 3,
                                         "skipped": [{"file": "f", "what": "w", "reason": "r"}], "newFolders": ["conditions"]}))
