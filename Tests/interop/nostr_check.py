#!/usr/bin/env python3
"""Independent checks with rust-nostr (the `nostr-sdk` package on PyPI).

Secrets are passed in files, never on the command line. Usage:
  nostr_check.py verify-event EVENT_JSON_FILE
  nostr_check.py nip44-decrypt NSEC_FILE PAYLOAD_FILE       -> prints the plaintext
  nostr_check.py nip44-encrypt NSEC_FILE PLAINTEXT_FILE     -> prints a payload (self key)
  nostr_check.py sign-auth NSEC_FILE CHALLENGE              -> prints a signed kind-22242 event
  nostr_check.py ncryptsec-pubkey NCRYPTSEC_FILE PASSWORD_FILE -> prints the public key hex
  nostr_check.py pubkey NSEC_FILE                           -> prints the public key hex
"""
import sys

import nostr_sdk as n


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def keys(nsec_file):
    return n.Keys(n.SecretKey.parse(read(nsec_file)))


def main(argv):
    cmd = argv[1]
    if cmd == "verify-event":
        event = n.Event.from_json(read(argv[2]))
        ok = event.verify()
        print("valid" if ok else "invalid")
        return 0 if ok else 1
    if cmd == "nip44-decrypt":
        k = keys(argv[2])
        sys.stdout.write(n.nip44_decrypt(k.secret_key(), k.public_key(), read(argv[3])))
        return 0
    if cmd == "nip44-encrypt":
        k = keys(argv[2])
        with open(argv[3], encoding="utf-8") as f:
            text = f.read()
        sys.stdout.write(n.nip44_encrypt(k.secret_key(), k.public_key(), text, n.Nip44Version.V2))
        return 0
    if cmd == "sign-auth":
        k = keys(argv[2])
        challenge = argv[3]
        event = n.EventBuilder(n.Kind(22242), challenge).tags([n.Tag.parse(["challenge", challenge])]).finalize(k)
        print(event.as_json())
        return 0
    if cmd == "ncryptsec-pubkey":
        enc = n.EncryptedSecretKey.from_bech32(read(argv[2]))
        sk = enc.decrypt(read(argv[3]))
        print(n.Keys(sk).public_key().to_hex())
        return 0
    if cmd == "pubkey":
        print(keys(argv[2]).public_key().to_hex())
        return 0
    print("unknown command", cmd, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
