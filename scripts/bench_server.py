#!/usr/bin/env python3
"""`binder serve` under attack (issue 12): clones per second and clone latency (median, p99)
of a small binder, first on a quiet server, then with 1,000 slowloris connections open (from
20 loopback addresses, reconnected as the server drops them) and 4 gzip bombs in flight
(each 1 GiB of zeros in about 1 MB: anonymous login, forged token, real token to upload-pack
and to receive-pack, each sent again as soon as it is answered). The server's resident
memory is sampled throughout. Loopback only; every loop is bounded in time and count.

Run through `scripts/bench --server` (README, "Benchmarks"). Needs nostr-sdk (scripts/setup)
for the logins. Results: OUT/server.json and a table on stdout.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTEROP = os.path.join(ROOT, "Tests", "interop")
sys.path.insert(0, INTEROP)
import server_attacks  # noqa: E402


def log(message):
    print(f"[bench-server {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def binder_binary():
    folder = os.environ.get("BINDER_BIN_DIR")
    candidates = [os.path.join(folder, "binder")] if folder else []
    candidates += [os.path.join(ROOT, ".build", "release", "binder"), os.path.join(ROOT, ".build", "debug", "binder")]
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    raise SystemExit("scripts/bench --server: no binder binary (build it, or set BINDER_BIN_DIR)")


def memory(pid):
    rss = peak = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) // 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) // 1024
    return rss, peak


def cpu_seconds(pid):
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values, p):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[index]


def clones(url, token_file, work, seconds, limit):
    """Clones the repository one after another for `seconds` (at most `limit` times)."""
    latencies, failures = [], 0
    deadline = time.monotonic() + seconds
    header = "Authorization: Bearer " + open(token_file).read().strip()
    for i in range(limit):
        if time.monotonic() >= deadline:
            break
        target = os.path.join(work, f"clone-{i}")
        started = time.monotonic()
        result = subprocess.run(["git", "-c", "http.extraHeader=" + header, "clone", "-q", url, target],
                                capture_output=True, timeout=120)
        elapsed = time.monotonic() - started
        if result.returncode == 0:
            latencies.append(elapsed)
        else:
            failures += 1
        shutil.rmtree(target, ignore_errors=True)
    return latencies, failures


def summarize(latencies, failures, seconds_spent):
    return {
        "clones": len(latencies), "failures": failures,
        "clones_per_second": round(len(latencies) / seconds_spent, 2) if seconds_spent else None,
        "median_ms": round(statistics.median(latencies) * 1000) if latencies else None,
        "p99_ms": round(percentile(latencies, 99) * 1000) if latencies else None,
        "max_ms": round(max(latencies) * 1000) if latencies else None,
    }


def main():
    parser = argparse.ArgumentParser(prog="scripts/bench --server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30, help="seconds of clones per phase (default 30)")
    parser.add_argument("--slow", type=int, default=1000, help="slowloris connections (default 1,000)")
    parser.add_argument("--bombs", type=int, default=4, help="gzip bombs in flight (default 4)")
    parser.add_argument("--out", default=os.path.join(ROOT, ".bench"), help="where server.json goes (default .bench/)")
    options = parser.parse_args()

    binder = binder_binary()
    work = tempfile.mkdtemp(prefix="bench-server-")
    server = None
    try:
        repos = os.path.join(work, "srv")
        serve_log = open(os.path.join(work, "serve.log"), "w")
        server = subprocess.Popen([binder, "serve", "--repos", repos, "--listen", "127.0.0.1:0",
                                   "--connections-per-address", "50", "--max-push-bytes", str(64 << 20)],
                                  stdout=subprocess.PIPE, stderr=serve_log, text=True)
        line = server.stdout.readline()
        port = int(line.rsplit(":", 1)[1])
        base = f"http://127.0.0.1:{port}"
        log(f"{binder} serving on {base}")

        # A user, and a small binder-like repository (30 files of ciphertext-sized JSON).
        nsec_file = os.path.join(work, "nsec")
        key = subprocess.run([sys.executable, "-c", "import nostr_sdk as n; print(n.Keys.generate().secret_key().to_bech32())"],
                             capture_output=True, text=True, check=True).stdout.strip()
        with open(nsec_file, "w") as f:
            f.write(key)
        token = subprocess.run([sys.executable, os.path.join(INTEROP, "mgit_client.py"), "login", base, nsec_file],
                               capture_output=True, text=True, check=True).stdout.strip()
        token_file = os.path.join(work, "token")
        with open(token_file, "w") as f:
            f.write(token)
        source = os.path.join(work, "source")
        os.makedirs(source)
        subprocess.run(["git", "init", "-q", "-b", "main", source], check=True)
        for i in range(30):
            with open(os.path.join(source, f"entry-{i:02d}.json"), "w") as f:
                f.write(json.dumps({"v": 2, "c": os.urandom(1500).hex()}))
        subprocess.run("git add -A && git -c user.name=b -c user.email=b@b commit -q -m 'Initialize binder'",
                       shell=True, cwd=source, check=True)
        url = base + "/api/mgit/repos/bench"
        subprocess.run(["git", "-c", "http.extraHeader=Authorization: Bearer " + token, "push", "-q", url, "main"],
                       cwd=source, check=True)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(repos, "bench.git")) for f in fs)

        log(f"quiet: clones for {options.seconds:.0f} s")
        started, cpu = time.monotonic(), cpu_seconds(server.pid)
        quiet = summarize(*clones(url, token_file, work, options.seconds, 2000), time.monotonic() - started)
        quiet["server_cpu_share"] = round((cpu_seconds(server.pid) - cpu) / (time.monotonic() - started), 2)
        quiet["load_average"] = os.getloadavg()[0]
        quiet_rss, _ = memory(server.pid)

        log(f"attack: {options.slow} slow connections and {options.bombs} gzip bombs")
        report = os.path.join(work, "slowloris")
        sources = [f"127.0.0.{i}" for i in range(2, 22)]
        flood = subprocess.Popen([sys.executable, os.path.join(INTEROP, "server_attacks.py"), "slowloris", "127.0.0.1",
                                  str(port), str(options.slow), str(options.seconds + 90), report] + sources,
                                 stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lines = open(report).read().split() if os.path.exists(report) else []
            counts = [int(lines[i + 1]) for i, w in enumerate(lines[:-1]) if w == "open"]
            if counts and max(counts) >= options.slow:
                break
            time.sleep(0.2)
        stop = threading.Event()
        answers = []
        targets = [(base + "/api/auth/nostr/verify", "none", "git-upload-pack"),
                   (url + "/git-upload-pack", "bogus", "git-upload-pack"),
                   (url + "/git-upload-pack", token_file, "git-upload-pack"),
                   (url + "/git-receive-pack", token_file, "git-receive-pack")]

        def bomber(target):
            for _ in range(1000):   # bounded; normally stopped by the event
                if stop.is_set():
                    break
                answers.append(server_attacks.bomb(target[0], 1024, target[1], target[2]))

        bombers = [threading.Thread(target=bomber, args=(targets[i % len(targets)],)) for i in range(options.bombs)]
        for thread in bombers:
            thread.start()
        samples = []

        def sampler():
            while not stop.is_set():
                samples.append(memory(server.pid)[0])
                time.sleep(0.5)
        watcher = threading.Thread(target=sampler)
        watcher.start()
        started, cpu = time.monotonic(), cpu_seconds(server.pid)
        attacked = summarize(*clones(url, token_file, work, options.seconds, 2000), time.monotonic() - started)
        attacked["server_cpu_share"] = round((cpu_seconds(server.pid) - cpu) / (time.monotonic() - started), 2)
        attacked["load_average"] = os.getloadavg()[0]
        stop.set()
        for thread in bombers + [watcher]:
            thread.join(timeout=120)
        flood.terminate()
        flood.wait(timeout=30)
        rss, peak = memory(server.pid)
        slow = {}
        if os.path.exists(report):
            last = open(report).read().strip().split("\n")[-1]
            slow = json.loads(last) if last.startswith("{") else {}
        results = {
            "binary": binder, "repository_bytes": size, "seconds_per_phase": options.seconds,
            "quiet": quiet, "under_attack": attacked,
            "bombs_answered": {status: answers.count(status) for status in sorted(set(answers))},
            "slowloris": slow,
            "server_rss_mib": {"quiet": quiet_rss, "attack_max_sampled": max(samples) if samples else None,
                               "after": rss, "peak": peak},
        }
        os.makedirs(options.out, exist_ok=True)
        with open(os.path.join(options.out, "server.json"), "w") as f:
            json.dump(results, f, indent=2)
        print("| phase | clones/s | median | p99 | max | failed | server CPU (cores) | load avg |\n|---|---|---|---|---|---|---|---|")
        for name, phase in (("quiet", quiet), ("under attack", attacked)):
            print(f"| {name} | {phase['clones_per_second']} | {phase['median_ms']} ms | {phase['p99_ms']} ms | "
                  f"{phase['max_ms']} ms | {phase['failures']} of {phase['clones'] + phase['failures']} | "
                  f"{phase['server_cpu_share']} | {phase['load_average']:.1f} |")
        print(f"\nrepository: {size // 1024} KiB on disk; bombs answered: {results['bombs_answered']}; "
              f"slowloris: {slow}\nserver RSS (MiB): {results['server_rss_mib']}")
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
