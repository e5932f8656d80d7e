#!/usr/bin/env python3
"""Many clients at once against `binder serve`'s front door (ServeFrontDoorTests).

Every client is a raw socket, so that what the server does is seen as it is: an HTTP status,
or a reset, or an empty reply. Prints one JSON object: how many clients got each outcome
("200", "503", ..., "reset", "empty", "timeout"), and "503_without_retry_after".

  front_door.py burst HOST PORT COUNT PATH
      COUNT connections opened first, all of them, then (a second later, so that the server
      has taken them all in) each sends `GET PATH` at once.
  front_door.py hold HOST PORT COUNT PATH HOLD_SECONDS FORWARDED_FOR
      COUNT connections each send a POST head to PATH with `X-Forwarded-For:` FORWARDED_FOR
      (`{i}` is the client's number), wait HOLD_SECONDS, then send its 2-byte body `{}`.
  front_door.py one HOST PORT METHOD PATH [HEADER: VALUE ...]
      one request; prints its status.
  front_door.py connect HOST PORT
      prints "accepted" or "refused".
"""
import json
import socket
import sys
import threading
import time

DEADLINE = 60


def read_answer(s):
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        return "reset" if not data.startswith(b"HTTP/1.1 ") else status_of(data)
    except socket.timeout:
        return "timeout" if not data else status_of(data)
    if not data:
        return "empty"
    return status_of(data)


def status_of(data):
    line = data.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        return "garbage"
    status = parts[1]
    if status == "503":
        head = data.split(b"\r\n\r\n", 1)[0].lower()
        if b"\r\nretry-after: " not in head:
            return "503_without_retry_after"
    return status


def run_clients(count, client):
    sockets = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(DEADLINE)
        s.connect((HOST, PORT))
        sockets.append(s)
    outcomes = [None] * count
    start = threading.Barrier(count)

    def work(i):
        try:
            start.wait()
            outcomes[i] = client(i, sockets[i])
        except ConnectionResetError:
            outcomes[i] = "reset"
        except BrokenPipeError:
            outcomes[i] = read_answer(sockets[i])
        except Exception as error:  # noqa: BLE001 - every failure is an outcome to report
            outcomes[i] = "error:" + type(error).__name__
        finally:
            sockets[i].close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE + 10)
    summary = {}
    for outcome in outcomes:
        summary[str(outcome)] = summary.get(str(outcome), 0) + 1
    return summary


def burst(count, path):
    def client(_, s):
        time.sleep(1)
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, HOST)).encode())
        return read_answer(s)
    return run_clients(count, client)


def hold(count, path, seconds, forwarded_for):
    def client(i, s):
        s.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                   "Content-Length: 2\r\nX-Forwarded-For: %s\r\n\r\n" % (path, HOST, forwarded_for.replace("{i}", str(i)))).encode())
        time.sleep(seconds)
        try:
            s.sendall(b"{}")
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered already (503): the answer is what counts
        return read_answer(s)
    return run_clients(count, client)


def one(method, path, headers):
    s = socket.create_connection((HOST, PORT), timeout=DEADLINE)
    extra = "".join(h + "\r\n" for h in headers)
    body = "{}" if method == "POST" else ""
    s.sendall(("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n%s\r\n%s"
               % (method, path, HOST, len(body), extra, body)).encode())
    answer = read_answer(s)
    s.close()
    return answer


if __name__ == "__main__":
    command, HOST, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if command == "burst":
        print(json.dumps(burst(int(sys.argv[4]), sys.argv[5]), sort_keys=True))
    elif command == "hold":
        print(json.dumps(hold(int(sys.argv[4]), sys.argv[5], float(sys.argv[6]), sys.argv[7]), sort_keys=True))
    elif command == "connect":
        try:
            socket.create_connection((HOST, PORT), timeout=5).close()
            print("accepted")
        except ConnectionRefusedError:
            print("refused")
    elif command == "one":
        print(one(sys.argv[4], sys.argv[5], sys.argv[6:]))
    else:
        sys.exit("unknown command " + command)
