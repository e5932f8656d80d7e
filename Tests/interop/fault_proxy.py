#!/usr/bin/env python3
"""A fault-injecting HTTP proxy on loopback, in front of a real `binder serve`, for the sync
tests: it forwards every request and answer unchanged, except that

  --fail-every N    answers every Nth request 503 (a JSON error body) without forwarding it;
  --reset-every N   resets every Nth connection (TCP RST, no answer) without forwarding;
  --reset-method-file PATH
                    while PATH exists, resets every request of the method it names (DELETE, say)
                    the same way: a test cuts the network for one kind of request, then mends it;
  --huge-challenge BYTES
                    answers POST /api/auth/nostr/challenge with a JSON body of BYTES bytes,
                    streamed with no Content-Length (only a client that counts stops early);
  --huge-advertisement BYTES
                    answers every GET info/refs (a ref advertisement) with BYTES bytes of pkt-lines,
                    streamed with no Content-Length;
  --stall-challenge answers POST /api/auth/nostr/challenge with headers and then nothing, ever;
  --busy-first N --retry-after SECONDS [--busy-status 429|503]
                    answers the first N requests 503 (or --busy-status) with `Retry-After: SECONDS`
                    without forwarding; a request that comes back sooner than SECONDS after a
                    busy answer is answered the same way and logged with status "early" (it
                    does not count towards N);
  --busy-file PATH  when PATH exists, the number in it is added to N (and PATH removed): a
                    test asks for more busy answers later;
  --retry-after-date
                    sends `Retry-After` as an HTTP date (the whole second SECONDS from now, rounded
                    up) instead of seconds; "early" is then a request before that date;
  --silent PREFIX   reads a request whose path starts with PREFIX and never answers it (the
                    connection stays open until the client gives up); logged "silent";
  --not-http        answers every request with bytes that are not HTTP, then closes; logged "not-http";
  --garbage-pack    answers POST git-upload-pack 200 with the right Content-Type and a body that is
                    not git's protocol; logged "garbage";
  --dribble-pack SECONDS --dribble-bytes N
                    forwards POST git-upload-pack, then sends the server's answer N bytes every
                    SECONDS (headers at once, with its Content-Length); logged "dribble";
  --limbo           behaves like limbo.health for a repository that does not exist yet: an
                    upload-pack ref advertisement that the server answers 404 becomes 403
                    {"error":"Not authorized for this repository"}.

Requests are counted from 1 in arrival order. Each line of the log (--log) is
"N METHOD PATH STATUS" (STATUS "reset" for a reset). Writes the port to --port-file once it
listens, then serves until killed.

usage: fault_proxy.py --upstream http://127.0.0.1:PORT --port-file FILE --log FILE [options]
"""
import argparse
import email.utils
import http.client
import http.server
import os
import socket
import struct
import threading
import time
import urllib.parse

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization",
              "proxy-authenticate", "content-length"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--fail-every", type=int, default=0)
    parser.add_argument("--reset-every", type=int, default=0)
    parser.add_argument("--reset-method-file")
    parser.add_argument("--huge-challenge", type=int, default=0)
    parser.add_argument("--huge-advertisement", type=int, default=0)
    parser.add_argument("--stall-challenge", action="store_true")
    parser.add_argument("--limbo", action="store_true")
    parser.add_argument("--busy-first", type=int, default=0)
    parser.add_argument("--retry-after", type=int, default=0)
    parser.add_argument("--busy-status", type=int, default=503)
    parser.add_argument("--busy-file")
    parser.add_argument("--retry-after-date", action="store_true")
    parser.add_argument("--silent")
    parser.add_argument("--not-http", action="store_true")
    parser.add_argument("--garbage-pack", action="store_true")
    parser.add_argument("--dribble-pack", type=float, default=0)
    parser.add_argument("--dribble-bytes", type=int, default=1)
    options = parser.parse_args()
    upstream = urllib.parse.urlparse(options.upstream)
    lock = threading.Lock()
    counter = [0]
    # Busy answers given, and when the last one went (monotonic seconds).
    busy = {"count": 0, "last": None, "until": None}
    log = open(options.log, "a", buffering=1)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def record(self, number, status):
            with lock:
                log.write(f"{number} {self.command} {self.path} {status}\n")

        def reset_method(self):
            try:
                with open(options.reset_method_file) as f:
                    return f.read().strip()
            except (OSError, TypeError):
                return None

        def handle_any(self):
            with lock:
                counter[0] += 1
                number = counter[0]
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if options.not_http:
                self.record(number, "not-http")
                self.close_connection = True
                try:
                    self.wfile.write(b"SSH-2.0-OpenSSH_9.6 this is not a web server\r\n")
                    self.wfile.flush()
                except OSError:
                    pass
                return
            if options.silent and self.path.startswith(options.silent):
                self.record(number, "silent")
                self.close_connection = True
                self.wait_for_close()
                return
            if (options.reset_every and number % options.reset_every == 0) or self.reset_method() == self.command:
                self.record(number, "reset")
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return
            if options.busy_file:
                with lock:
                    try:
                        with open(options.busy_file) as f:
                            options.busy_first += int(f.read().strip() or 0)
                        os.remove(options.busy_file)
                    except FileNotFoundError:
                        pass
            if options.busy_first:
                with lock:
                    now = time.monotonic()
                    if options.retry_after_date:
                        early = busy["until"] is not None and time.time() < busy["until"]
                    else:
                        early = busy["last"] is not None and now - busy["last"] < options.retry_after
                    answer_busy = early or busy["count"] < options.busy_first
                    if answer_busy:
                        busy["last"] = now
                        if not early:
                            busy["count"] += 1
                            busy["until"] = int(time.time()) + 1 + options.retry_after
                    until = busy["until"]
                if answer_busy:
                    wait = (email.utils.formatdate(until, usegmt=True) if options.retry_after_date and until
                            else str(options.retry_after))
                    self.reply(number, "early" if early else options.busy_status, b'{"error":"busy, come back later"}',
                               (("Content-Type", "application/json"), ("Retry-After", wait)),
                               status=options.busy_status)
                    return
            if options.fail_every and number % options.fail_every == 0:
                self.reply(number, 503, b'{"error":"injected fault"}')
                return
            if options.huge_challenge and self.command == "POST" and self.path == "/api/auth/nostr/challenge":
                self.stream(number, "application/json", b'{"challenge":"', b"a" * 65536, options.huge_challenge, b'"}')
                return
            if options.stall_challenge and self.command == "POST" and self.path == "/api/auth/nostr/challenge":
                self.stall(number)
                return
            if options.huge_advertisement and self.command == "GET" and "/info/refs?service=" in self.path:
                service = self.path.rsplit("=", 1)[-1]
                line = b"0050" + b"0" * 40 + b" refs/heads/padding-padding-padding\n"
                self.stream(number, f"application/x-{service}-advertisement", b"", line, options.huge_advertisement, b"0000")
                return
            if options.garbage_pack and self.command == "POST" and self.path.endswith("/git-upload-pack"):
                self.reply(number, "garbage", b"<html>Welcome to the hotel Wi-Fi: please log in</html>\n",
                           (("Content-Type", "application/x-git-upload-pack-result"),), status=200)
                return
            connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            if body:
                headers["Content-Length"] = str(len(body))
            try:
                connection.request(self.command, self.path, body=body if body else None, headers=headers)
                answer = connection.getresponse()
                data = answer.read()
            except OSError:
                self.reply(number, 502, b'{"error":"upstream down"}')
                return
            finally:
                connection.close()
            status = answer.status
            answer_headers = [(k, v) for k, v in answer.getheaders() if k.lower() not in HOP_BY_HOP]
            if (options.limbo and status == 404 and self.command == "GET"
                    and self.path.endswith("/info/refs?service=git-upload-pack")):
                status, data = 403, b'{"error":"Not authorized for this repository"}'
                answer_headers = [("Content-Type", "application/json")]
            if options.dribble_pack and self.command == "POST" and self.path.endswith("/git-upload-pack") and status == 200:
                self.dribble(number, data, answer_headers)
                return
            self.reply(number, status, data, answer_headers)

        def dribble(self, number, data, headers):
            """The answer's headers at once, then its body a few bytes at a time."""
            self.record(number, "dribble")
            self.send_response(200)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.flush()
                for offset in range(0, len(data), options.dribble_bytes):
                    time.sleep(options.dribble_pack)
                    self.wfile.write(data[offset:offset + options.dribble_bytes])
                    self.wfile.flush()
            except OSError:
                pass

        def reply(self, number, logged, data, headers=(("Content-Type", "application/json"),), status=None):
            self.record(number, logged)
            self.send_response(status or logged)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def stream(self, number, content_type, head, chunk, total, tail):
            """A 200 answer of about `total` bytes, `chunk` repeated, ended by closing."""
            self.record(number, "huge")
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.write(head)
                for _ in range(total // len(chunk)):
                    self.wfile.write(chunk)
                self.wfile.write(tail)
            except OSError:
                pass

        def stall(self, number):
            """Headers, then silence until the client gives up."""
            self.record(number, "stall")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.flush()
            self.close_connection = True
            self.wait_for_close()

        def wait_for_close(self):
            """Silence until the client gives up (closes the connection)."""
            try:
                while self.connection.recv(1024):
                    pass
            except OSError:
                pass

        do_GET = do_POST = do_PUT = do_DELETE = handle_any

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(options.port_file, "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
