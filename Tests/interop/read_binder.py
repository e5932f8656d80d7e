#!/usr/bin/env python3
"""Reads a binder repository the way the Limbo Health apps do, with independent code:
rust-nostr (nostr-sdk) for NIP-44 and `cryptography` for the DEK sidecars' ChaCha20-Poly1305.

usage: read_binder.py REPOSITORY NSEC_FILE
Prints one JSON object: {"documents": {path: json}, "folders": {path: json},
"sidecars": {path: sha256 of the decrypted bytes}}. Exits non-zero if anything fails.
"""
import base64
import hashlib
import json
import subprocess
import sys

import nostr_sdk as n
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


def main(repo, nsec_file):
    keys = n.Keys(n.SecretKey.parse(open(nsec_file, encoding="utf-8").read().strip()))
    print(json.dumps(read(repo, keys), ensure_ascii=False))
    return 0


def read(repo, keys):
    """Every file of `main` decrypted with `keys` (self conversation key); raises on any failure."""
    sk, pk = keys.secret_key(), keys.public_key()

    def nip44(text):
        return n.nip44_decrypt(sk, pk, text)

    out = {"documents": {}, "folders": {}, "sidecars": {}}
    for path in git(repo, "ls-tree", "-r", "--name-only", "main").decode().splitlines():
        blob = git(repo, "cat-file", "blob", "main:" + path)
        if path.endswith("/.meta.json") or path == ".meta.json":
            out["folders"][path] = json.loads(nip44(blob.decode()))
        elif path.endswith(".json"):
            out["documents"][path] = json.loads(nip44(blob.decode()))
        elif path.endswith(".enc"):
            if blob[0] == 0x02:
                length = int.from_bytes(blob[1:3], "big")
                dek = bytes.fromhex(nip44(blob[3:3 + length].decode()))
                nonce = blob[3 + length:3 + length + 12]
                text = ChaCha20Poly1305(dek).decrypt(nonce, blob[3 + length + 12:], None)
            else:
                out["sidecars"][path] = "legacy-0xFF"  # binder never writes this format
                continue
            out["sidecars"][path] = hashlib.sha256(base64.b64decode(text, validate=True)).hexdigest()
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
