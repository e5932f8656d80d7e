#!/usr/bin/env python3
"""The doctor's side of "Share with a doctor", written independently of binder: takes the QR
payload as limbo.health/scan does (same checks), clones the staging repository with command-line
git and the scan token, and decrypts every file with the throwaway key (rust-nostr's NIP-44,
`cryptography`'s ChaCha20-Poly1305, via read_binder.read).

usage: scan_doctor.py PAYLOAD_FILE WORK_FOLDER [NOTE_TEXT [RECORD_PATH]]
With NOTE_TEXT, then writes and pushes a note as the scan page does (visits/<UTC day>-doctor-note.json,
encrypted to the throwaway key, author Doctor <scan@limbo.health>, pushed with the scan token).
With RECORD_PATH too (a shared record's .json path), the note is appended to that record's
children instead (a doctor_note child; the record's value, metadata and other children as they
were), as `binder open-share` writes a note on a record.
Prints one JSON object: {"repoId", "head", "documents", "folders", "sidecars"}. Exits non-zero
if the payload is refused, the clone fails or any file fails to decrypt.
"""
import json
import os
import subprocess
import sys
import time

import nostr_sdk as n

import read_binder


def main(payload_file, work, note=None, record=None):
    text = open(payload_file, encoding="utf-8").read().strip()
    payload = json.loads(text)
    # The scan page's own acceptance rules.
    if payload.get("action") != "scan_session":
        sys.exit("not a scan_session payload")
    if time.time() * 1000 >= payload["expiresAt"] * 1000:
        sys.exit("payload expired")
    for field in ("ephemeralPrivkey", "sessionToken", "repoId"):
        if not payload.get(field):
            sys.exit("payload lacks " + field)
    url = payload["endpoint"] + "/api/mgit/repos/" + payload["repoId"]
    clone = os.path.join(work, payload["repoId"])
    # The token goes in a header here (git appends paths to the URL, so not as a query).
    subprocess.run(["git", "-c", "http.extraHeader=Authorization: ScanToken " + payload["sessionToken"],
                    "clone", "--quiet", "--branch", "main", url, clone], check=True, capture_output=True)
    keys = n.Keys(n.SecretKey.parse(payload["ephemeralPrivkey"]))
    out = read_binder.read(clone, keys)
    out["repoId"] = payload["repoId"]
    out["head"] = subprocess.run(["git", "-C", clone, "rev-parse", "main"], check=True,
                                 capture_output=True, text=True).stdout.strip()
    if note is not None:
        day = time.strftime("%Y-%m-%d", time.gmtime())
        document = {"value": note, "metadata": {"type": "visit", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                "provider": "Doctor (via scan)"}, "children": []}
        sk = keys.secret_key()
        if record is None:
            os.makedirs(os.path.join(clone, "visits"), exist_ok=True)
            path = "visits/" + day + "-doctor-note.json"
        else:
            path = record
            with open(os.path.join(clone, path), encoding="utf-8") as f:
                shared = json.loads(n.nip44_decrypt(sk, keys.public_key(), f.read().strip()))
            document["metadata"]["type"] = "doctor_note"
            shared["children"].append(document)
            document = shared
        with open(os.path.join(clone, path), "w", encoding="utf-8") as f:
            f.write(n.nip44_encrypt(sk, keys.public_key(), json.dumps(document, separators=(",", ":"), ensure_ascii=False),
                                    n.Nip44Version.V2))
        git = ["git", "-C", clone, "-c", "user.name=Doctor", "-c", "user.email=scan@limbo.health"]
        subprocess.run(git + ["add", path], check=True, capture_output=True)
        subprocess.run(git + ["commit", "-q", "-m", "Doctor note added " + day], check=True, capture_output=True)
        subprocess.run(git + ["-c", "http.extraHeader=Authorization: ScanToken " + payload["sessionToken"], "push", "-q",
                              "origin", "main"], check=True, capture_output=True)
        out["pushed"] = subprocess.run(["git", "-C", clone, "rev-parse", "main"], check=True,
                                       capture_output=True, text=True).stdout.strip()
    print(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
