#!/usr/bin/env python3
"""An independent client of the mgit-api protocol (login, listing, QR), written with rust-nostr
(the `nostr-sdk` package on PyPI) and the standard library: it checks `binder serve` without
binder's own code. Secrets are passed in files, never on the command line.

usage:
  mgit_client.py login SERVER NSEC_FILE [plain|gzip|chunked]  -> prints the token
  mgit_client.py login-across SERVER NSEC_FILE VERIFY_SERVER   -> the same, the challenge from SERVER answered at VERIFY_SERVER
  mgit_client.py verify-bad SERVER NSEC_FILE CASE             -> prints the HTTP status of a bad login
      CASE: wrong-kind | stale | reused | bad-signature | wrong-challenge | unknown-challenge
  mgit_client.py get SERVER PATH [TOKEN_FILE]                 -> prints "STATUS BODY"
  mgit_client.py post SERVER PATH BODY_FILE TOKEN_FILE        -> prints "STATUS BODY" (BODY_FILE: JSON)
"""
import gzip
import json
import sys
import time
import urllib.error
import urllib.request

import nostr_sdk as n


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def call(method, url, body=None, token=None, encoding="plain"):
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        raw = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
        if encoding == "gzip":
            data = gzip.compress(raw)
            headers["Content-Encoding"] = "gzip"
        elif encoding == "chunked":
            # An iterable body without Content-Length is sent with Transfer-Encoding: chunked.
            data = iter([raw[: len(raw) // 2], raw[len(raw) // 2 :]])
        else:
            data = raw
    if token:
        headers["Authorization"] = "Bearer " + token
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def challenge(server):
    status, body = call("POST", server + "/api/auth/nostr/challenge", {})
    assert status == 200, (status, body)
    return json.loads(body)["challenge"]


def signed(keys, kind, content, tag, created_at=None):
    builder = n.EventBuilder(n.Kind(kind), content).tags([n.Tag.parse(["challenge", tag])])
    if created_at is not None:
        builder = builder.custom_created_at(n.Timestamp.from_secs(created_at))
    return json.loads(builder.finalize(keys).as_json())


def verify(server, event, chal, encoding="plain"):
    return call("POST", server + "/api/auth/nostr/verify",
                {"signedEvent": event, "challenge": chal, "userType": "patient"}, encoding=encoding)


def main(argv):
    cmd, server = argv[1], argv[2].rstrip("/")
    if cmd in ("login", "login-across"):
        keys = n.Keys(n.SecretKey.parse(read(argv[3])))
        encoding = argv[4] if cmd == "login" and len(argv) > 4 else "plain"
        verifier = argv[4].rstrip("/") if cmd == "login-across" else server
        chal = challenge(server)
        status, body = verify(verifier, signed(keys, 22242, chal, chal), chal, encoding)
        if status != 200:
            print(status, body.decode(), file=sys.stderr)
            return 1
        answer = json.loads(body)
        assert answer["pubkey"] == keys.public_key().to_hex(), answer
        print(answer["token"])
        return 0
    if cmd == "verify-bad":
        keys = n.Keys(n.SecretKey.parse(read(argv[3])))
        case = argv[4]
        chal = challenge(server)
        if case == "wrong-kind":
            event = signed(keys, 1, chal, chal)
        elif case == "stale":
            event = signed(keys, 22242, chal, chal, created_at=int(time.time()) - 3600)
        elif case == "reused":
            event = signed(keys, 22242, chal, chal)
            first, _ = verify(server, event, chal)
            assert first == 200, first
        elif case == "bad-signature":
            event = signed(keys, 22242, chal, chal)
            event["sig"] = ("0" if event["sig"][0] != "0" else "1") + event["sig"][1:]
        elif case == "wrong-challenge":
            event = signed(keys, 22242, "something else", "something else")
        elif case == "unknown-challenge":
            event = signed(keys, 22242, "f" * 64, "f" * 64)
            chal = "f" * 64
        else:
            print("unknown case", case, file=sys.stderr)
            return 2
        status, _ = verify(server, event, chal)
        print(status)
        return 0
    if cmd == "get":
        token = read(argv[4]) if len(argv) > 4 else None
        status, body = call("GET", server + argv[3], token=token)
        print(status, body.decode())
        return 0
    if cmd == "delete":
        status, body = call("DELETE", server + argv[3], token=read(argv[4]))
        print(status, body.decode())
        return 0
    if cmd == "post":
        status, body = call("POST", server + argv[3], body=json.loads(read(argv[4])), token=read(argv[5]))
        print(status, body.decode())
        return 0
    print("unknown command", cmd, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
