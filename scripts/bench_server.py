#!/usr/bin/env python3
"""`binder serve` under attack (issues 12 and 42): clones and pushes per second and their
latency (median, p99) for each store (the folder, or PostgreSQL) with one and two replicas
(sharing the store and one token secret file; clients spread over them in turn), first on a
quiet server, then with 1,000 slowloris connections open (from 20 loopback addresses,
reconnected as the server drops them, spread over the replicas) and 4 gzip bombs in flight
(each 1 GiB of zeros in about 1 MB: anonymous login, forged token, real token to upload-pack
and to receive-pack, each sent again as soon as it is answered). Each replica's resident
memory (peak: VmHWM) and CPU, PostgreSQL's CPU and its transactions per operation are
recorded. The database store runs on a private cluster (initdb in a temporary folder, as the
postgres user when root; Debian's postgresql, scripts/setup). Loopback only; every loop is
bounded in time and count.

Run through `scripts/bench --server` (README, "Benchmarks"). Needs nostr-sdk (scripts/setup)
for the logins. Results: OUT/server.json and a table on stdout.
"""

import argparse
import glob
import itertools
import json
import os
import pwd
import secrets
import socket
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


def git_env():
    return dict(os.environ, GIT_TERMINAL_PROMPT="0")


class Postgres:
    """A private PostgreSQL cluster (as Tests/BinderTestPostgres starts one), stopped at the end."""

    def __init__(self):
        versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not versions:
            raise SystemExit("scripts/bench --server: no /usr/lib/postgresql/*/bin/initdb (scripts/setup --deps-only)")
        self.bin = os.path.dirname(versions[-1])
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
        self.folder = tempfile.mkdtemp(prefix="bench-pg-")
        self.password = secrets.token_hex(16)
        if self.as_user:
            entry = pwd.getpwnam("postgres")
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        password_file = os.path.join(self.folder, "pw")
        with open(password_file, "w") as f:
            f.write(self.password)
        if self.as_user:
            os.chown(password_file, entry.pw_uid, entry.pw_gid)
        self.run("initdb", "-D", self.folder + "/data", "-U", "binder_bench", "--pwfile=" + password_file,
                 "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8")
        os.remove(password_file)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.run("pg_ctl", "start", "-w", "-t", "60", "-D", self.folder + "/data", "-l", self.folder + "/server.log",
                 "-o", f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} -c max_connections=200")
        self.databases = 0

    def run(self, tool, *arguments):
        return subprocess.run(self.as_user + [os.path.join(self.bin, tool)] + list(arguments), check=True,
                              capture_output=True, text=True).stdout

    def database(self):
        self.databases += 1
        name = f"bench{self.databases}"
        self.run("createdb", "-h", self.folder, "-p", str(self.port), "-U", "binder_bench", name)
        return name, f"postgres://binder_bench:{self.password}@127.0.0.1:{self.port}/{name}?sslmode=disable"

    def transactions(self, name):
        out = self.run("psql", "-h", self.folder, "-p", str(self.port), "-U", "binder_bench", "-d", name, "-XAtc",
                       f"SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '{name}'")
        return int(out.strip() or 0)

    def cpu_seconds(self):
        """CPU time of the postmaster and its children (the backends serving the replicas)."""
        with open(self.folder + "/data/postmaster.pid") as f:
            postmaster = int(f.readline())
        total = cpu_seconds(postmaster)
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(stat) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == postmaster:
                    total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except (OSError, ValueError, IndexError):
                pass
        return total

    def stop(self):
        subprocess.run(self.as_user + [os.path.join(self.bin, "pg_ctl"), "stop", "-m", "fast", "-D", self.folder + "/data"],
                       capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_replicas(binder, store, count, work, postgres):
    """`count` replicas of `store` on loopback: their processes and base URLs, and the database's name."""
    secret_file = os.path.join(work, "token-secret")
    with open(os.open(secret_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(secrets.token_hex(32))
    options = ["--token-secret-file", secret_file, "--connections-per-address", "50", "--max-push-bytes", str(64 << 20)]
    database = None
    if store == "database":
        database, url = postgres.database()
        url_file = os.path.join(work, "database-url")
        with open(os.open(url_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(url)
        options += ["--database-url-file", url_file]
    replicas, bases = [], []
    for index in range(count):
        extra = ["--cache", os.path.join(work, f"cache-{index}")] if store == "database" else []
        log_file = open(os.path.join(work, f"serve-{index}.log"), "w")
        process = subprocess.Popen([binder, "serve", "--repos", os.path.join(work, "srv"), "--listen", "127.0.0.1:0"] + options + extra,
                                   stdout=subprocess.PIPE, stderr=log_file, text=True)
        replicas.append(process)
        line = process.stdout.readline()
        if ":" not in line:
            raise SystemExit(f"replica {index} did not start: " + open(log_file.name).read()[-2000:])
        bases.append(f"http://127.0.0.1:{int(line.rsplit(':', 1)[1])}")
    return replicas, bases, database


def clone_loop(urls, header, work, deadline, limit, tag):
    """Clones one after another, through the replicas in turn, until `deadline` (at most `limit`)."""
    latencies, failures = [], 0
    for i in range(limit):
        if time.monotonic() >= deadline:
            break
        target = os.path.join(work, f"clone-{tag}-{i}")
        started = time.monotonic()
        result = subprocess.run(["git", "-c", "http.extraHeader=" + header, "clone", "-q", urls[i % len(urls)], target],
                                capture_output=True, timeout=120, env=git_env())
        if result.returncode == 0:
            latencies.append(time.monotonic() - started)
        else:
            failures += 1
        shutil.rmtree(target, ignore_errors=True)
    return latencies, failures


def push_loop(urls, header, source, deadline, limit, tag):
    """Commits one small entry and pushes it, through the replicas in turn, until `deadline`."""
    latencies, failures = [], 0
    for i in range(limit):
        if time.monotonic() >= deadline:
            break
        with open(os.path.join(source, f"push-{tag}-{i}.json"), "w") as f:
            f.write(json.dumps({"v": 2, "c": os.urandom(1500).hex()}))
        subprocess.run(f"git add -A && git -c user.name=b -c user.email=b@b commit -q -m 'entry {i}'", shell=True, cwd=source,
                       check=True)
        started = time.monotonic()
        result = subprocess.run(["git", "-c", "http.extraHeader=" + header, "push", "-q", urls[i % len(urls)], "HEAD:main"],
                                cwd=source, capture_output=True, timeout=120, env=git_env())
        if result.returncode == 0:
            latencies.append(time.monotonic() - started)
        else:
            failures += 1
            subprocess.run(["git", "-c", "http.extraHeader=" + header, "pull", "-q", "--rebase", urls[i % len(urls)], "main"],
                           cwd=source, capture_output=True, timeout=120, env=git_env())
    return latencies, failures


def summarize(latencies, failures, seconds_spent, unit):
    return {
        unit: len(latencies), "failures": failures,
        "per_second": round(len(latencies) / seconds_spent, 2) if seconds_spent else None,
        "median_ms": round(statistics.median(latencies) * 1000) if latencies else None,
        "p99_ms": round(percentile(latencies, 99) * 1000) if latencies else None,
    }


def phase(replicas, bases, clone_urls, push_sources, header, work, seconds, postgres, database):
    """Clones (two clients) then pushes (two clients, each to its own repository), `seconds` each."""
    result = {}
    for kind in ("clones", "pushes"):
        cpu = [cpu_seconds(r.pid) for r in replicas]
        pg_cpu = postgres.cpu_seconds() if database else 0
        transactions = postgres.transactions(database) if database else 0
        started = time.monotonic()
        deadline = started + seconds
        outcomes = [None, None]

        def client(n):
            if kind == "clones":
                outcomes[n] = clone_loop(clone_urls[n:] + clone_urls[:n], header, work, deadline, 5000, f"{n}-{started}")
            else:
                outcomes[n] = push_loop(push_sources[n][1][n:] + push_sources[n][1][:n], header, push_sources[n][0],
                                        deadline, 5000, f"{n}-{started}")
        threads = [threading.Thread(target=client, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        spent = time.monotonic() - started
        latencies = outcomes[0][0] + outcomes[1][0]
        summary = summarize(latencies, outcomes[0][1] + outcomes[1][1], spent, kind)
        summary["replica_cpu_cores"] = [round((cpu_seconds(r.pid) - c) / spent, 2) for r, c in zip(replicas, cpu)]
        if database:
            summary["postgres_cpu_cores"] = round((postgres.cpu_seconds() - pg_cpu) / spent, 2)
            done = max(1, len(latencies))
            summary["db_transactions_per_op"] = round((postgres.transactions(database) - transactions) / done, 1)
        summary["load_average"] = round(os.getloadavg()[0], 1)
        result[kind] = summary
    return result


def attack_start(bases, options, work):
    """The slowloris flood (spread over the replicas) and the gzip bombers; returns a stop function."""
    floods = []
    for index, base in enumerate(bases):
        port = base.rsplit(":", 1)[1]
        report = os.path.join(work, f"slowloris-{index}")
        sources = [f"127.0.{index + 1}.{i}" for i in range(2, 22)]
        floods.append((report, subprocess.Popen([sys.executable, os.path.join(INTEROP, "server_attacks.py"), "slowloris",
                                                 "127.0.0.1", port, str(options.slow // len(bases)),
                                                 str(options.seconds * 2 + 90), report] + sources, stdout=subprocess.DEVNULL)))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        opened = 0
        for report, _ in floods:
            words = open(report).read().split() if os.path.exists(report) else []
            counts = [int(words[i + 1]) for i, w in enumerate(words[:-1]) if w == "open" and words[i + 1].isdigit()]
            opened += max(counts) if counts else 0
        if opened >= options.slow - len(bases):
            break
        time.sleep(0.2)
    stop = threading.Event()
    answers = []
    token_file, url = options.token_file, options.bench_url

    def bomber(n):
        base = bases[n % len(bases)]
        target = [(base + "/api/auth/nostr/verify", "none", "git-upload-pack"),
                  (url(base) + "/git-upload-pack", "bogus", "git-upload-pack"),
                  (url(base) + "/git-upload-pack", token_file, "git-upload-pack"),
                  (url(base) + "/git-receive-pack", token_file, "git-receive-pack")][n % 4]
        for _ in range(1000):   # bounded; normally stopped by the event
            if stop.is_set():
                break
            answers.append(server_attacks.bomb(target[0], 1024, target[1], target[2]))
    bombers = [threading.Thread(target=bomber, args=(n,)) for n in range(options.bombs)]
    for thread in bombers:
        thread.start()

    def finish():
        stop.set()
        for thread in bombers:
            thread.join(timeout=120)
        slow = []
        for report, flood in floods:
            flood.terminate()
            flood.wait(timeout=30)
            last = open(report).read().strip().split("\n")[-1] if os.path.exists(report) else ""
            slow.append(json.loads(last) if last.startswith("{") else {})
        return {status: answers.count(status) for status in sorted(set(answers))}, slow
    return finish


def run_configuration(binder, store, count, options, postgres, key):
    work = tempfile.mkdtemp(prefix=f"bench-server-{store}-{count}-")
    replicas = []
    try:
        replicas, bases, database = start_replicas(binder, store, count, work, postgres)
        log(f"{store} store, {count} replica(s): {' '.join(bases)}")
        nsec_file = os.path.join(work, "nsec")
        with open(nsec_file, "w") as f:
            f.write(key)
        token = subprocess.run([sys.executable, os.path.join(INTEROP, "mgit_client.py"), "login", bases[-1], nsec_file],
                               capture_output=True, text=True, check=True).stdout.strip()
        token_file = os.path.join(work, "token")
        with open(token_file, "w") as f:
            f.write(token)
        header = "Authorization: Bearer " + token
        # A small binder-like repository (30 files of ciphertext-sized JSON) to clone, and one per pushing client.
        sources = []
        for name in ("bench", "pushes-0", "pushes-1"):
            source = os.path.join(work, name)
            os.makedirs(source)
            subprocess.run(["git", "init", "-q", "-b", "main", source], check=True)
            for i in range(30):
                with open(os.path.join(source, f"entry-{i:02d}.json"), "w") as f:
                    f.write(json.dumps({"v": 2, "c": os.urandom(1500).hex()}))
            subprocess.run("git add -A && git -c user.name=b -c user.email=b@b commit -q -m 'Initialize binder'",
                           shell=True, cwd=source, check=True)
            subprocess.run(["git", "-c", "http.extraHeader=" + header, "push", "-q", f"{bases[0]}/api/mgit/repos/{name}", "main"],
                           cwd=source, check=True, env=git_env())
            sources.append((source, [f"{base}/api/mgit/repos/{name}" for base in bases]))
        clone_urls = sources[0][1]
        options.token_file, options.bench_url = token_file, (lambda base: base + "/api/mgit/repos/bench")

        log(f"quiet: {options.seconds:.0f} s of clones, {options.seconds:.0f} s of pushes")
        quiet = phase(replicas, bases, clone_urls, sources[1:], header, work, options.seconds, postgres, database)
        quiet_rss = [memory(r.pid)[0] for r in replicas]
        log(f"attack: {options.slow} slow connections and {options.bombs} gzip bombs")
        finish = attack_start(bases, options, work)
        attacked = phase(replicas, bases, clone_urls, sources[1:], header, work, options.seconds, postgres, database)
        bombs, slow = finish()
        return {"store": store, "replicas": count, "quiet": quiet, "under_attack": attacked, "bombs_answered": bombs,
                "slowloris": slow, "replica_rss_mib": {"quiet": quiet_rss, "after": [memory(r.pid)[0] for r in replicas],
                                                       "peak_vmhwm": [memory(r.pid)[1] for r in replicas]}}
    finally:
        for process in replicas:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(prog="scripts/bench --server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30, help="seconds of clones, then of pushes, per phase (default 30)")
    parser.add_argument("--slow", type=int, default=1000, help="slowloris connections (default 1,000)")
    parser.add_argument("--bombs", type=int, default=4, help="gzip bombs in flight (default 4)")
    parser.add_argument("--stores", default="folder,database", help="folder, database or both (default folder,database)")
    parser.add_argument("--replicas", default="1,2", help="replica counts to run (default 1,2)")
    parser.add_argument("--out", default=os.path.join(ROOT, ".bench"), help="where server.json goes (default .bench/)")
    options = parser.parse_args()

    binder = binder_binary()
    stores = [s for s in options.stores.split(",") if s]
    counts = [int(c) for c in options.replicas.split(",") if c]
    postgres = Postgres() if "database" in stores else None
    key = subprocess.run([sys.executable, "-c", "import nostr_sdk as n; print(n.Keys.generate().secret_key().to_bech32())"],
                         capture_output=True, text=True, check=True).stdout.strip()
    runs = []
    try:
        for store, count in itertools.product(stores, counts):
            runs.append(run_configuration(binder, store, count, options, postgres, key))
    finally:
        if postgres:
            postgres.stop()
    os.makedirs(options.out, exist_ok=True)
    with open(os.path.join(options.out, "server.json"), "w") as f:
        json.dump({"binary": binder, "seconds_per_phase": options.seconds, "runs": runs}, f, indent=2)
    print("| store | replicas | phase | clones/s | clone p99 | pushes/s | push p99 | failed | replica CPU (cores) | PostgreSQL CPU | db xacts per clone / push | load |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        for name in ("quiet", "under_attack"):
            c, p = run[name]["clones"], run[name]["pushes"]
            print(f"| {run['store']} | {run['replicas']} | {name.replace('_', ' ')} | {c['per_second']} | {c['p99_ms']} ms | "
                  f"{p['per_second']} | {p['p99_ms']} ms | {c['failures']} + {p['failures']} | "
                  f"{c['replica_cpu_cores']} / {p['replica_cpu_cores']} | {c.get('postgres_cpu_cores', '-')} / {p.get('postgres_cpu_cores', '-')} | "
                  f"{c.get('db_transactions_per_op', '-')} / {p.get('db_transactions_per_op', '-')} | {p['load_average']} |")
    for run in runs:
        print(f"{run['store']} x{run['replicas']}: replica RSS MiB {run['replica_rss_mib']}; bombs answered {run['bombs_answered']}")


if __name__ == "__main__":
    main()
