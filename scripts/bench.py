#!/usr/bin/env python3
"""binder's benchmark: the same plaintext as a plain folder, a gocryptfs mount and a binder.

One run generates a seeded corpus, lays it out three ways, times each operation on the three
layouts in turn (interleaved, so that drift of the machine hits all alike), and prints one
table of medians, min-max and the ratios binder/plain and binder/gocryptfs, checked against
the goals of issue 46. The read rows also time the corpus served by an empty FUSE file system
(scripts/fuse-floor.c, mounted twice: with binder's options, and answering OPEN and FLUSH with
ENOSYS as a read-only binder does): the least any FUSE file system takes, the "floor" the read
goals are set against. Raw samples go to OUT/results.json, the table to OUT/results.md.

Run through scripts/bench (README, "Benchmarks"). Python 3 standard library only.
"""

import argparse
import collections
import datetime
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import string
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUTS = ("plain", "gocryptfs", "binder")
# The empty FUSE file system's two mounts (FuseFloor), timed beside the three in the read rows.
FLOOR, FLOOR_NO_OPEN = "floor", "floor-no-open"
COLUMNS = ("plain", "gocryptfs", FLOOR, FLOOR_NO_OPEN, "binder")
COLUMN_TITLES = {FLOOR: "floor", FLOOR_NO_OPEN: "floor, no OPEN"}
MEMORY_HEADROOM = 64 << 20   # issue 46: the daemon's peak at most the plaintext + 64 MiB
MARKER = "zorblatt"          # the word grep looks for; in a known number of entries
PASSWORD = "bench passphrase"
BINDER_NAME = "bench"
EXPORT_RECORDS = 1000  # records in the PDF export row (issue 18)


def log(message):
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------------

# Category folders and their share of entries (the apps' usual folders; see Categories.swift).
CATEGORIES = [
    ("visits", "visit", 0.24), ("labs", "lab", 0.18), ("conditions", "condition", 0.14),
    ("medications", "medication", 0.10), ("allergies", "allergy", 0.03),
    ("immunizations", "immunization", 0.06), ("procedures", "procedure", 0.08),
    ("imaging", "imaging", 0.07), ("insurance", "insurance", 0.03), ("documents", "document", 0.07),
]
CONDITIONS = ["hypertension", "back-acne", "asthma", "type-2-diabetes", "migraine", "eczema",
              "knee-injury", "hypothyroidism", "anxiety", "gerd", "high-cholesterol", "sleep-apnea"]
PROVIDERS = ["Dr. Amara Okafor", "Dr. Lucas Martin", "Dr. Priya Raman", "Dr. Tomás Herrera",
             "City Lab", "Northside Imaging", "Dr. Hannah Weiss", "Dr. Kenji Sato", "Riverside Clinic"]
TAGS = ["annual", "blood-pressure", "cholesterol", "follow-up", "urgent", "dermatology", "sports",
        "cardiology", "pediatric", "telehealth", "fasting", "chronic", "referral", "vaccine"]
WORDS = ("patient reports mild moderate severe pain swelling fever cough fatigue headache nausea "
         "dizziness blood pressure heart rate temperature weight oxygen saturation normal elevated "
         "reduced stable improved worsening follow up recheck weeks months daily twice morning evening "
         "tablet dose lisinopril metformin atorvastatin ibuprofen amoxicillin albuterol levothyroxine "
         "omeprazole prescribed continue stop start increase decrease referral physiotherapy imaging "
         "ultrasound x-ray mri ct scan results within range high low borderline fasting glucose "
         "cholesterol ldl hdl triglycerides hemoglobin a1c thyroid tsh creatinine sodium potassium "
         "discussed diet exercise sleep hydration stress alcohol smoking history family allergy "
         "reaction rash hives no known issues plan assessment examination clear lungs abdomen soft "
         "tender knee shoulder back wrist ankle range motion strength reflexes vision hearing the and "
         "of to with for on at in after before during since about around").split()
EXTENSIONS = ["jpg", "pdf", "png"]


def yaml_list(items):
    return "[" + ", ".join(items) + "]"


def make_body(rng, kind, target, marked):
    """Markdown of about `target` bytes: a title, sections, lists, a table for labs."""
    parts = [f"# {kind.capitalize()} — {' '.join(rng.choices(WORDS, k=3))}\n"]
    if marked:
        parts.append(f"\nNote: {MARKER} follow-up pending.\n")
    size = sum(len(p.encode()) for p in parts)
    section = 0
    while size < target:
        section += 1
        choice = rng.random()
        if choice < 0.15:
            block = "\n## " + " ".join(rng.choices(WORDS, k=2)).capitalize() + "\n"
        elif choice < 0.35:
            block = "\n" + "".join(f"- {' '.join(rng.choices(WORDS, k=rng.randint(3, 9)))}\n"
                                   for _ in range(rng.randint(2, 6)))
        elif choice < 0.45 and kind == "lab":
            rows = "".join(f"| {rng.choice(WORDS)} | {rng.randint(1, 400)} mg/dL | {rng.randint(1, 200)}–{rng.randint(201, 400)} |\n"
                           for _ in range(rng.randint(3, 8)))
            block = "\n| Test | Result | Range |\n|---|---|---|\n" + rows
        else:
            words = rng.choices(WORDS, k=rng.randint(25, 90))
            block = "\n" + " ".join(words).capitalize() + ".\n"
        parts.append(block)
        size += len(block.encode())
    return "".join(parts)


def make_entry(rng, kind, created, marked, target):
    tags = sorted(set(rng.choices(TAGS, k=rng.randint(0, 3))))
    front = ["---", f"type: {kind}", f'created: "{created}"', f'updated: "{created}"',
             f"provider: {rng.choice(PROVIDERS)}"]
    if tags:
        front.append(f"tags: {yaml_list(tags)}")
    if rng.random() < 0.2:
        front.append(f'npi: "{rng.randint(0, 9_999_999_999):010d}"')
    front.append("---\n")
    head = "\n".join(front)
    return head + make_body(rng, kind, max(200, target - len(head)), marked)


def random_date(rng):
    day = datetime.date(2015, 1, 1) + datetime.timedelta(days=rng.randint(0, 3650))
    return day, f"{day.isoformat()}T{rng.randint(7, 19):02d}:{rng.randint(0, 59):02d}:00.000Z"


def generate_corpus(directory, entries, attachments, seed, one_folder=False):
    """Writes the corpus; returns its manifest (what every layout must show). With `one_folder`
    every entry goes into `visits/` (the attachments stay where they would be)."""
    rng = random.Random(seed)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    marked_count = max(1, entries // 40)
    marked = set(rng.sample(range(entries), marked_count))
    weights = [w for _, _, w in CATEGORIES]
    files, total_bytes, doc_sizes = [], 0, []
    for i in range(entries):
        folder, kind, _ = rng.choices(CATEGORIES, weights=weights)[0]
        if folder == "conditions" and rng.random() < 0.85:
            folder = f"conditions/{rng.choice(CONDITIONS)}"
        if one_folder:
            folder = "visits"
        day, created = random_date(rng)
        # Sizes: log-normal with a 3 KB median, bounded well under NIP-44's 65,535 bytes.
        target = int(min(40_000, max(400, rng.lognormvariate(8.006, 0.55))))
        slug = "-".join(rng.choices(WORDS, k=2)).replace(" ", "-")
        relative = f"{folder}/{day.isoformat()}-{slug}-{i:05d}.md"
        text = make_entry(rng, kind, created, i in marked, target).encode()
        os.makedirs(os.path.join(directory, folder), exist_ok=True)
        with open(os.path.join(directory, relative), "wb") as f:
            f.write(text)
        files.append(relative)
        doc_sizes.append(len(text))
        total_bytes += len(text)
    attachment_files, attachment_bytes = [], 0
    for j in range(attachments):
        # The first one is the 3 MB attachment read 20 times; the others 200 KB to 3 MB.
        size = 3 * 1024 * 1024 if j == 0 else rng.randint(200_000, 3 * 1024 * 1024)
        folder = rng.choice(["imaging", "labs", "documents", f"conditions/{rng.choice(CONDITIONS)}"]) if j else "imaging"
        ext = "jpg" if j == 0 else rng.choice(EXTENSIONS)
        day, _ = random_date(rng)
        relative = f"{folder}/{day.isoformat()}-scan-a{j:03d}.{ext}"
        os.makedirs(os.path.join(directory, folder), exist_ok=True)
        with open(os.path.join(directory, relative), "wb") as f:
            f.write(rng.randbytes(size))
        attachment_files.append(relative)
        attachment_bytes += size
    doc_sizes.sort()
    folder_sizes = collections.Counter(os.path.dirname(f) for f in files)
    return {
        "entries": entries, "attachments": attachments, "seed": seed,
        "marked_entries": marked_count,
        "entry_bytes": total_bytes, "entry_median_bytes": doc_sizes[len(doc_sizes) // 2] if doc_sizes else 0,
        "attachment_bytes": attachment_bytes,
        "plaintext_bytes": total_bytes + attachment_bytes,
        "files": sorted(files + attachment_files),
        "big_attachment": attachment_files[0] if attachment_files else None,
        "save_target": sorted(f for f in files if f.startswith("visits/"))[0],
        "folders": sorted({os.path.dirname(f) for f in files + attachment_files}),
        "largest_folder": max(folder_sizes, key=folder_sizes.get) if folder_sizes else "",
        "largest_folder_entries": max(folder_sizes.values(), default=0),
    }


# ---------------------------------------------------------------------------------------------
# Processes, mounts and caches
# ---------------------------------------------------------------------------------------------

def large_ccd(target_bytes=1_000_000):
    """The test CCD (Tests/Fixtures/import/ccd.xml) grown to about `target_bytes` with its lipid
    panel repeated on successive days: each copy is a record of its own (another day), as in a
    portal's CCD of many years of results."""
    text = open(os.path.join("Tests", "Fixtures", "import", "ccd.xml"), encoding="utf-8").read()
    results = text.index("<!-- Results")
    start = text.index("<entry", results)
    end = text.index("</entry>", start) + len("</entry>")
    entry = text[start:end]
    copies = []
    day = datetime.date(2000, 1, 1)
    size = len(text.encode())
    while size < target_bytes:
        copy = entry.replace("20241001", day.strftime("%Y%m%d"))
        copies.append(copy)
        size += len(copy.encode())
        day += datetime.timedelta(days=1)
    return text[:end] + "\n" + "\n".join(copies) + text[end:], len(copies) + 1


# The folder row's mix (issue 41: "a folder of 10,000 files imported"): what a patient keeps of
# their records: notes in markdown (the corpus' sizes: log-normal, 3 KB median), scans and photos
# as JPEG (30-300 KB, downsized as a phone shares them), portal PDFs (20-200 KB).
FOLDER_MIX = (("md", 0.80), ("jpg", 0.12), ("pdf", 0.08))
FOLDER_SUBFOLDERS = ("visits", "labs", "imaging", "documents", "insurance", "conditions/knee-injury")


def generate_folder(directory, files, seed):
    """Writes a folder of `files` files (FOLDER_MIX) in category subfolders; returns its counts.
    JPEGs and PDFs have their formats' headers and trailers around random bytes: binder
    recognises them by content and keeps their bytes as they are."""
    rng = random.Random(seed)
    shutil.rmtree(directory, ignore_errors=True)
    counts, total = collections.Counter(), 0
    for i in range(files):
        ext = rng.choices([e for e, _ in FOLDER_MIX], weights=[w for _, w in FOLDER_MIX])[0]
        folder = rng.choice(FOLDER_SUBFOLDERS)
        day, created = random_date(rng)
        if ext == "md":
            target = int(min(40_000, max(400, rng.lognormvariate(8.006, 0.55))))
            data = make_entry(rng, "note", created, False, target).encode()
        elif ext == "jpg":
            data = (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
                    + rng.randbytes(rng.randint(30_000, 300_000)) + b"\xff\xd9")
        else:
            data = (b"%PDF-1.4\n1 0 obj << /Length 0 >> stream\n" + rng.randbytes(rng.randint(20_000, 200_000))
                    + b"\nendstream endobj\ntrailer << >>\n%%EOF\n")
        path = os.path.join(directory, folder, f"{day.isoformat()}-{rng.choice(WORDS)}-{i:05d}.{ext}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        counts[ext] += 1
        total += len(data)
    return {"files": files, "bytes": total, "by_kind": dict(counts), "seed": seed}


def run(args, cwd=None, env=None, check=True, timeout=3600, input=None):
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, input=input)
    if check and result.returncode != 0:
        raise BenchError(f"{' '.join(args) if isinstance(args, list) else args} failed ({result.returncode}): "
                         f"{result.stderr.strip()[-2000:]}")
    return result


def shell(command, cwd=None, env=None, check=True, timeout=3600):
    return run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env, check=check, timeout=timeout)


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)


def can_drop_caches():
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def status_of(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
    except OSError:
        return {}
    return fields


def kib(text):
    return int(text.split()[0]) if text else 0


def find_pid(*needles):
    """The pid of the process whose command line holds every needle (the mount daemons)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        text = [a.decode(errors="replace") for a in argv]
        if text and "fusermount" not in text[0] and all(any(n in a for a in text) for n in needles):
            return int(entry)
    return None


class Plain:
    name = "plain"

    def __init__(self, out):
        self.root = os.path.join(out, "plain")

    def setup(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def import_command(self, corpus):
        return f"cp -r '{corpus}' '{self.root}' && sync"

    def mount(self, **_):
        pass

    def unmount(self):
        pass

    def mount_command(self):
        return f"ls '{self.root}' > /dev/null"

    def pid(self):
        return None

    def disk_bytes(self):
        return du(self.root)


class Gocryptfs:
    name = "gocryptfs"

    def __init__(self, out):
        self.base = os.path.join(out, "gocryptfs")
        self.cipher = os.path.join(self.base, "cipher")
        self.root = os.path.join(self.base, "mnt")

    def setup(self):
        self.unmount()
        shutil.rmtree(self.base, ignore_errors=True)
        os.makedirs(self.cipher)
        os.makedirs(self.root)
        run(["gocryptfs", "-init", "-q", "-extpass", f"echo {PASSWORD}", self.cipher])
        self.mount()

    def import_command(self, corpus):
        return f"cp -r '{corpus}/.' '{self.root}/' && sync"

    def mount_command(self):
        return f"gocryptfs -q -extpass 'echo {PASSWORD}' '{self.cipher}' '{self.root}' && ls '{self.root}' > /dev/null"

    def mount(self, **_):
        if not is_mounted(self.root):
            shell(self.mount_command())

    def unmount(self):
        if is_mounted(self.root):
            run(["fusermount3", "-u", self.root])
            wait_unmounted(self.root)

    def pid(self):
        return find_pid("gocryptfs", self.cipher)

    def disk_bytes(self):
        return du(self.cipher)


class FuseFloor:
    """The empty FUSE file system (scripts/fuse-floor.c) serving the corpus from its memory with
    binder's libfuse options: the least any FUSE file system takes for the read rows. With
    `no_open` it answers OPEN (and FLUSH) with ENOSYS, as a read-only binder does, so the kernel
    sends neither for any file. Cold, for it, is a fresh mount with the kernel's caches dropped
    (its files stay in its memory: nothing is read from the disk)."""

    def __init__(self, out, binary, corpus, no_open):
        self.name = FLOOR_NO_OPEN if no_open else FLOOR
        self.base = os.path.join(out, self.name)
        self.root = os.path.join(self.base, "mnt")
        self.binary, self.corpus = binary, corpus
        # fuse-floor reads its settings from the environment by presence: none but ours.
        self.env = {k: v for k, v in os.environ.items() if k not in ("NO_OPEN", "CLOSE_FLUSH", "CACHE_SYMLINKS", "LINKS")}
        if no_open:
            self.env["NO_OPEN"] = "1"

    def setup(self):
        self.unmount()
        shutil.rmtree(self.base, ignore_errors=True)
        os.makedirs(self.root)
        self.mount()

    def mount(self, **_):
        if not is_mounted(self.root):
            run([self.binary, self.corpus, self.root], env=self.env)
            deadline = time.time() + 60
            while not is_mounted(self.root):
                if time.time() > deadline:
                    raise BenchError(f"fuse-floor did not mount {self.root}")
                time.sleep(0.05)

    def unmount(self):
        if is_mounted(self.root):
            run(["fusermount3", "-u", self.root])
            wait_unmounted(self.root)

    def pid(self):
        return find_pid(self.binary, self.root)


class Binder:
    name = "binder"

    def __init__(self, out, binary):
        self.base = os.path.join(out, "binder")
        self.home = os.path.join(self.base, "home")
        self.root = os.path.join(self.base, "mnt")
        self.binary = binary
        self.env = dict(os.environ, BINDER_HOME=self.home)
        self.cache_size = None
        self.read_only = False
        # The daemon's peak over the whole run (issue 46): VmHWM of each daemon right before it
        # is unmounted (and at the end), with the phase it was mounted in and the one it was
        # sampled in. Bench sets `phase` as the run goes.
        self.phase = "set-up"
        self.mounted_in = None
        self.peaks = []

    def cli(self, *args, check=True):
        return run([self.binary, *args], env=self.env, check=check)

    def setup(self):
        self.unmount()
        shutil.rmtree(self.base, ignore_errors=True)
        os.makedirs(self.root)
        pw = f"/dev/fd/0"
        run([self.binary, "key", "generate", "--passphrase-file", pw], env=self.env, input=PASSWORD + "\n")
        run([self.binary, "unlock", "--timeout", "8h", "--passphrase-file", pw], env=self.env, input=PASSWORD + "\n")
        self.cli("create", BINDER_NAME, "--patient-name", "Bench Patient", "--dob", "1980-01-01")
        self.mount()

    def import_command(self, corpus):
        return f"cp -r '{corpus}/.' '{self.root}/' && sync"

    def mount_args(self):
        extra = f" --cache-size {self.cache_size}" if self.cache_size else ""
        extra += " --read-only" if self.read_only else ""
        return f"'{self.binary}' mount {BINDER_NAME} '{self.root}'{extra} > /dev/null"

    def mount_command(self):
        return self.mount_args() + f" && ls '{self.root}' > /dev/null"

    def mount(self, cache_size=None, read_only=False):
        self.cache_size = cache_size
        self.read_only = read_only
        if not is_mounted(self.root):
            shell(self.mount_args(), env=self.env)
            self.mounted_in = self.phase

    def sample_peak(self, where):
        """Records the mounted daemon's VmHWM (its peak so far) with where the run is."""
        daemon = self.pid() if is_mounted(self.root) else None
        fields = status_of(daemon) if daemon else {}
        if fields.get("VmHWM"):
            self.peaks.append({"pid": daemon, "VmHWM_kib": kib(fields["VmHWM"]), "mounted_in": self.mounted_in,
                               "sampled_in": f"{self.phase}, {where}", "cache_size": self.cache_size,
                               "read_only": self.read_only})

    def unmount(self):
        if is_mounted(self.root):
            self.sample_peak("before unmounting")
            daemon = self.pid()
            self.cli("unmount", self.root)
            wait_unmounted(self.root)
            # The daemon zeroes and frees its plaintext after the unmount: wait for it to end,
            # so that the next mount's daemon is the only one (and has the machine to itself).
            deadline = time.time() + 60
            while daemon and os.path.exists(f"/proc/{daemon}") and time.time() < deadline:
                time.sleep(0.05)

    def pid(self):
        return find_pid("--daemon-child", self.root)

    def save_log(self, out):
        """The daemon's log (paths and reasons, never plaintext) beside the results."""
        log_file = os.path.join(self.home, "logs", f"{BINDER_NAME}.log")
        if os.path.exists(log_file):
            shutil.copy(log_file, os.path.join(out, "binder-daemon.log"))

    def status(self):
        fields = {}
        try:
            with open(os.path.join(self.root, ".binder", "status")) as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if value.strip():
                        fields[key.strip()] = value.strip()
        except OSError:
            pass
        return fields

    def disk_bytes(self):
        return du(os.path.join(self.home, "binders", BINDER_NAME))

    def repository_bytes(self):
        """(on-disk size of the repository, ciphertext bytes its tree holds, `git count-objects`):
        a binder is a bare repository, so the first is all binder keeps on disk."""
        folder = os.path.join(self.home, "binders", BINDER_NAME)
        listing = run(["git", "-C", folder, "ls-tree", "-r", "-l", "HEAD"]).stdout
        ciphertext = sum(int(line.split()[3]) for line in listing.splitlines() if line.split()[1] == "blob")
        objects = run(["git", "-C", folder, "count-objects", "-v"]).stdout
        return du(folder), ciphertext, objects

    def lock(self):
        if os.path.exists(self.home):
            self.cli("lock", check=False)


def parse_front_matter(text):
    """The corpus's own front matter (this script wrote it): `key: value`, quoted strings, [lists]."""
    _, head, body = text.split("---\n", 2)
    metadata = {}
    for line in head.splitlines():
        key, _, value = line.partition(": ")
        if value.startswith('"'):
            metadata[key] = json.loads(value)
        elif value.startswith("["):
            metadata[key] = [v.strip() for v in value[1:-1].split(",") if v.strip()]
        else:
            metadata[key] = value
    return metadata, body


def bulk_write_binder(binder, corpus, files):
    """Writes the corpus straight into the binder's repository in the apps' format (docs/FORMAT.md),
    as one commit, with independent code: rust-nostr (nostr-sdk) for NIP-44 and `cryptography`
    for the sidecars (both installed by scripts/setup for the interoperability tests). This is
    what a binder cloned from the server looks like; importing 10,000 entries through the mount
    takes hours (docs/BENCHMARKS.md)."""
    import base64
    try:
        import nostr_sdk as n
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    except ImportError as error:
        raise BenchError(f"--binder-import bulk needs nostr-sdk and cryptography (scripts/setup installs them): {error}")
    nsec = binder.cli("key", "export", "--nsec", "--confirm-plaintext").stdout.strip()
    keys = n.Keys(n.SecretKey.parse(nsec))
    sk, pk = keys.secret_key(), keys.public_key()

    def nip44(data):
        return n.nip44_encrypt(sk, pk, data, n.Nip44Version.V2).encode()

    def document(value, metadata):
        return nip44(json.dumps({"value": value, "metadata": metadata, "children": []},
                                ensure_ascii=False, separators=(",", ":")))

    formats = {"jpg": "jpeg", "png": "png", "pdf": "pdf"}
    repository = os.path.join(binder.home, "binders", BINDER_NAME)
    stream = []
    folders = set()
    for relative in files:
        folder, name = os.path.split(relative)
        parts = folder.split("/")
        folders.update("/".join(parts[:i + 1]) for i in range(len(parts)))
        content = open(os.path.join(corpus, relative), "rb").read()
        stem, ext = os.path.splitext(name)
        if ext == ".md":
            metadata, body = parse_front_matter(content.decode())
            stream.append((f"{folder}/{stem}.json", document(body, metadata)))
        else:
            dek, nonce = os.urandom(32), os.urandom(12)
            wrapped = nip44(dek.hex())
            sealed = ChaCha20Poly1305(dek).encrypt(nonce, base64.b64encode(content), None)
            stream.append((f"{folder}/{name}.enc", b"\x02" + len(wrapped).to_bytes(2, "big") + wrapped + nonce + sealed))
            fmt = formats.get(ext[1:], ext[1:])
            stream.append((f"{folder}/{stem}.json", document(f"{name}.enc", {
                "type": "attachment_ref", "format": fmt, "encoding": "base64",
                "originalSizeBytes": len(content), "created": "2025-01-01T00:00:00.000Z"})))
    for folder in sorted(folders):
        stream.append((f"{folder}/.meta.json", nip44(json.dumps({"displayName": folder.split("/")[-1]}))))
    # git fast-import: every blob, then one commit on top of main (which holds patient-info.json).
    parent = run(["git", "-C", repository, "rev-parse", "main"]).stdout.strip()
    chunks = []
    for mark, (_, blob) in enumerate(stream, start=1):
        chunks.append(b"blob\nmark :%d\ndata %d\n" % (mark, len(blob)) + blob + b"\n")
    message = b"Add entries"
    now = int(time.time())
    chunks.append(b"commit refs/heads/main\nauthor Limbo Health <app@limbo.health> %d +0000\n"
                  b"committer Limbo Health <app@limbo.health> %d +0000\ndata %d\n%s\nfrom %s\n"
                  % (now, now, len(message), message, parent.encode()))
    for mark, (path, _) in enumerate(stream, start=1):
        chunks.append(b"M 100644 :%d %s\n" % (mark, path.encode()))
    chunks.append(b"done\n")
    result = subprocess.run(["git", "-C", repository, "fast-import", "--quiet", "--done"], input=b"".join(chunks),
                            capture_output=True)
    if result.returncode != 0:
        raise BenchError(f"git fast-import failed: {result.stderr.decode()[-2000:]}")
    run(["sync"])


def wait_unmounted(path, timeout=20):
    deadline = time.time() + timeout
    while is_mounted(path):
        if time.time() > deadline:
            raise BenchError(f"{path} is still mounted")
        time.sleep(0.05)


def du(path):
    total = 0
    for base, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(base, name)).st_blocks * 512
            except OSError:
                pass
    return total


def list_files(root):
    out = []
    for base, dirs, names in os.walk(root):
        dirs.sort()
        for name in names:
            out.append(os.path.relpath(os.path.join(base, name), root))
    return sorted(out)


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------

def timed_shell(command, cwd=None, env=None, timeout=3600):
    start = time.perf_counter()
    result = shell(command, cwd=cwd, env=env, timeout=timeout)
    return time.perf_counter() - start, result.stdout


def record_text(i, marker_free=True):
    body = (f"# Note {i}\n\n" + ("Blood pressure 128/82, heart rate 70, follow up in three months. " * 60))[:3900]
    text = f'---\ntype: note\ncreated: "2025-06-01T10:00:00.000Z"\n---\n{body}\n'
    return text.encode()[:4096].ljust(4096, b"\n")


def write_records(folder, count, sync):
    """Writes `count` new 4 KB records into `folder`, each closed (and fsynced when `sync`)."""
    latencies = []
    start = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        fd = os.open(os.path.join(folder, f"2025-06-01-note-{i:04d}.md"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, record_text(i))
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        latencies.append(time.perf_counter() - t0)
    return time.perf_counter() - start, latencies


def atomic_save(path, content):
    """An editor's save: write a temporary file beside the record, fsync, rename over it (gedit's way)."""
    folder = os.path.dirname(path)
    temporary = os.path.join(folder, ".goutputstream-" + "".join(random.choices(string.ascii_uppercase + string.digits, k=6)))
    t0 = time.perf_counter()
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, content)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temporary, path)
    return time.perf_counter() - t0


def read_file_times(path, times):
    start = time.perf_counter()
    total = 0
    for _ in range(times):
        with open(path, "rb", buffering=0) as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                total += len(chunk)
    return time.perf_counter() - start, total


def summary(samples):
    if not samples:
        return None
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


def percentile(values, p):
    ordered = sorted(values)
    if not ordered:
        return None
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class Bench:
    def __init__(self, options):
        self.options = options
        self.out = os.path.abspath(options.out)
        self.corpus = os.path.join(self.out, "corpus")
        self.tmp = os.path.join(self.out, "tmp")
        self.binaries = {}
        self.results = {"rows": {}, "notes": []}
        self.layouts = {}
        self.can_drop = False
        self.cleanup_paths = []

    # -- set-up ----------------------------------------------------------------------------

    def prepare_tools(self):
        bin_dir = os.environ.get("BINDER_BIN_DIR")
        if not self.options.no_build:
            log("building (scripts/setup, then swift build -c release --product binder-bench)")
            subprocess.run(["scripts/setup"], cwd=ROOT, check=True)
            subprocess.run(["swift", "build", "-c", "release", "--product", "binder-bench"], cwd=ROOT, check=True)
        release = os.path.join(ROOT, ".build", "release")
        for tool in ("binder", "binder-bench"):
            candidates = ([os.path.join(bin_dir, tool)] if bin_dir else []) + [os.path.join(release, tool)]
            found = next((c for c in candidates if os.access(c, os.X_OK)), None)
            if found is None and tool == "binder":
                raise BenchError(f"no binder binary (looked in {', '.join(candidates)}); run without --no-build")
            self.binaries[tool] = found
        if not shutil.which("gocryptfs"):
            log("installing gocryptfs (apt-get)")
            sudo = [] if os.geteuid() == 0 else ["sudo"]
            run(sudo + ["apt-get", "update", "-qq"], timeout=900)
            run(sudo + ["apt-get", "install", "-y", "-qq", "gocryptfs"], env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), timeout=900)
        for tool in ("fusermount3", "gocryptfs", "grep", "tar", "cp", "cc", "pkg-config"):
            if not shutil.which(tool):
                raise BenchError(f"{tool} is missing")
        # The empty FUSE file system of the floor columns, built here as scripts/fuse-floor does.
        flags = run(["pkg-config", "--cflags", "--libs", "fuse3"]).stdout.split()
        self.binaries["fuse-floor"] = os.path.join(self.out, "fuse-floor")
        run(["cc", "-O2", "-o", self.binaries["fuse-floor"], os.path.join(ROOT, "scripts", "fuse-floor.c"), *flags])
        self.can_drop = can_drop_caches()
        if not self.can_drop:
            self.results["notes"].append("caches could not be dropped (not root?): cold rows are only remounted")

    def machine(self):
        def first(path, key):
            try:
                with open(path) as f:
                    for line in f:
                        if line.startswith(key):
                            return line.split(":", 1)[1].strip()
            except OSError:
                return None
        source = shell(f"findmnt -no SOURCE,FSTYPE -T '{self.out}'", check=False).stdout.strip()
        device = os.path.basename(source.split()[0]) if source else ""
        rotational = None
        try:
            with open(f"/sys/block/{device}/queue/rotational") as f:
                rotational = f.read().strip() == "1"
        except OSError:
            pass
        commit = shell("git rev-parse --short HEAD", cwd=ROOT, check=False).stdout.strip()
        return {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "nproc": os.cpu_count(),
            "cpu": first("/proc/cpuinfo", "model name"), "memory": first("/proc/meminfo", "MemTotal"),
            "kernel": platform.release(), "disk": source, "disk_rotational_flag": rotational,
            "binder_commit": commit, "binder_binary": self.binaries.get("binder"),
            "gocryptfs": shell("gocryptfs -version", check=False).stdout.strip(),
            "load_at_start": open("/proc/loadavg").read().split()[:3],
        }

    def set_up_layouts(self):
        manifest = self.manifest
        plain, gocrypt, binder = Plain(self.out), Gocryptfs(self.out), Binder(self.out, self.binaries["binder"])
        self.layouts = {"plain": plain, "gocryptfs": gocrypt, "binder": binder}
        imports = {}
        binder.phase = "import (cp -r through the mount)"
        for layout in (plain, gocrypt, binder):
            log(f"{layout.name}: importing the corpus (cp -r into a fresh {'folder' if layout is plain else 'mount'})")
            layout.setup()
            drop_caches()
            if layout is binder and self.options.binder_import == "bulk":
                # Written straight into git (as a clone would be), then mounted afresh.
                binder.unmount()
                start = time.perf_counter()
                bulk_write_binder(binder, self.corpus, manifest["files"])
                binder.mount()
                log(f"binder: written in bulk (not through the mount) in {time.perf_counter() - start:.1f} s")
                continue
            seconds, _ = timed_shell(layout.import_command(self.corpus), timeout=8 * 3600)
            imports[layout.name] = [seconds]
            log(f"{layout.name}: imported in {seconds:.1f} s")
        title = "import (cp -r corpus in, then sync)"
        if self.options.binder_import == "bulk":
            title += " (binder: --binder-import bulk, not measured)"
        self.results["rows"][title] = {"mode": "once", "unit": "s", "samples": imports}
        for no_open in (False, True):
            floor = FuseFloor(self.out, self.binaries["fuse-floor"], self.corpus, no_open)
            log(f"{floor.name}: mounting the empty FUSE file system over the corpus")
            floor.setup()
            self.layouts[floor.name] = floor
        self.verify_layouts()
        self.record_disk()

    def record_disk(self):
        self.results["disk_bytes"] = {name: self.layouts[name].disk_bytes() for name in LAYOUTS if name in self.layouts}
        if "binder" in self.layouts:
            repository_bytes, ciphertext, objects = self.layouts["binder"].repository_bytes()
            self.results["binder_repository"] = {"repository_bytes": repository_bytes, "ciphertext_bytes": ciphertext,
                                                 "count_objects": objects}

    def set_up_binder_in_bulk(self):
        """Only the binder layout, written straight into git (for --views-only)."""
        binder = Binder(self.out, self.binaries["binder"])
        self.layouts = {"binder": binder}
        binder.setup()
        binder.unmount()
        bulk_write_binder(binder, self.corpus, self.manifest["files"])
        binder.mount()

    def verify_layouts(self):
        """Every layout shows the corpus: the same files, the same attachments, the marker count."""
        manifest = self.manifest
        expected = manifest["files"]
        for name, layout in self.layouts.items():
            files = [f for f in list_files(layout.root) if not (name == "binder" and f == "patient-info.md")]
            if files != expected:
                missing = sorted(set(expected) - set(files))[:5]
                extra = sorted(set(files) - set(expected))[:5]
                raise BenchError(f"{name} does not show the corpus: {len(files)} files for {len(expected)}; "
                                 f"missing {missing}, unexpected {extra}")
            count = int(shell(f"grep -r {MARKER} . | wc -l", cwd=layout.root).stdout.strip())
            if count != manifest["marked_entries"]:
                raise BenchError(f"{name}: grep found {MARKER} in {count} lines, expected {manifest['marked_entries']}")
            if manifest["big_attachment"]:
                run(["cmp", os.path.join(self.corpus, manifest["big_attachment"]), os.path.join(layout.root, manifest["big_attachment"])])
        log(f"verified: {len(expected)} files and {manifest['marked_entries']} marked entries in every layout")

    # -- driving the three layouts -----------------------------------------------------------

    def prepare_cold(self, layout):
        """Caches dropped, then a fresh mount with nothing decrypted: the daemon's code is loaded
        by the (untimed) mount, as after any mount; the data it reads is not in any cache. The
        empty FUSE file system reads the corpus into its memory when mounted: it is mounted
        first, then the caches are dropped."""
        layout.unmount()
        if isinstance(layout, FuseFloor):
            layout.mount()
            drop_caches()
            return
        drop_caches()
        layout.mount(read_only=getattr(layout, "read_only", False))

    def rotation(self, rep, names=LAYOUTS):
        names = list(names)
        k = rep % len(names)
        return names[k:] + names[:k]

    def measure_row(self, title, op, modes, reps, check=None, unit="s", names=LAYOUTS, floor=None, warmups=1):
        """Runs `op(layout)` -> seconds for each of `names`, `reps` times per mode, interleaved;
        `floor` names the empty FUSE file system binder's ratio is taken against."""
        for mode in modes:
            row = {"mode": mode, "unit": unit, "samples": {n: [] for n in names}, "capped": {}}
            if floor:
                row["floor"] = floor
            key = f"{title}, {mode}"
            self.results["rows"][key] = row
            log(f"{key}: {reps[mode]} repetitions")
            if mode == "warm":
                for _ in range(warmups):       # fill the caches (not timed)
                    for name in names:
                        op(self.layouts[name])
            for rep in range(reps[mode]):
                for name in self.rotation(rep, names):
                    if name in row["capped"]:
                        continue
                    layout = self.layouts[name]
                    if mode == "cold":
                        self.prepare_cold(layout)
                    seconds, output = op(layout)
                    if check:
                        check(name, output)
                    row["samples"][name].append(seconds)
                    if seconds > self.options.slow_limit and rep + 1 < reps[mode]:
                        row["capped"][name] = (f"{len(row['samples'][name])} sample(s): one took {seconds:.0f} s "
                                               f"(> {self.options.slow_limit:.0f} s)")
                log(f"  rep {rep + 1}: " + ", ".join(f"{n} {row['samples'][n][-1]:.3f}" for n in names if row["samples"][n]))

    def shell_op(self, command):
        def op(layout):
            return timed_shell(command.format(root=layout.root, tmp=self.tmp, name=layout.name), cwd=layout.root)
        return op

    def check_grep(self, name, output):
        count = int(output.strip())
        if count != self.manifest["marked_entries"]:
            raise BenchError(f"{name}: grep -r found {count} lines, expected {self.manifest['marked_entries']}")

    def read_rows(self):
        """The read-write mount's read rows, the empty FUSE file system (with binder's options:
        an OPEN per file, noflush) beside the three layouts."""
        o = self.options
        reps = {"warm": o.reps, "cold": o.cold_reps}
        os.makedirs(self.tmp, exist_ok=True)
        names = ("plain", "gocryptfs", FLOOR, "binder")

        def measure(title, op, check=None):
            self.measure_row(title, op, ("warm", "cold"), reps, check=check, names=names, floor=FLOOR)
        measure("grep -r", self.shell_op(f"grep -r {MARKER} . | wc -l"), check=self.check_grep)
        measure("ls -lR", self.shell_op("ls -lR . > /dev/null"))
        largest, size = self.manifest["largest_folder"], self.manifest["largest_folder_entries"]

        def check_count(name, output):
            # `ls -l` prints a "total" line, then one line per entry (binder may add sidecar-free extras).
            if int(output.strip()) < size + 1:
                raise BenchError(f"{name}: ls -l {largest} printed {output.strip()} lines, expected {size + 1}+")
        measure(f"ls -l of one folder ({size:,} records)", self.shell_op(f"ls -l '{largest}' | wc -l"), check=check_count)
        measure(self.copy_title(), self.copy_out)
        measure("tar c", self.shell_op("tar cf - . | wc -c"))
        if self.manifest["big_attachment"]:
            def read_big(layout):
                seconds, total = read_file_times(os.path.join(layout.root, self.manifest["big_attachment"]), 20)
                return seconds, str(total)
            measure("3 MB attachment read x20", read_big)

    def copy_destination(self):
        """Where cp -r copies to: memory (tmpfs) when there is room, so that what is measured is
        reading the layout, not creating 10,000 files on the disk (which dominates a copy to ext4)."""
        if "copy_destination" not in self.results:
            copies = self.tmp
            if os.path.isdir("/dev/shm") and shutil.disk_usage("/dev/shm").free > 3 * self.manifest["plaintext_bytes"]:
                copies = os.path.join("/dev/shm", f"binder-bench-{os.getpid()}")
                self.cleanup_paths.append(copies)
            os.makedirs(copies, exist_ok=True)
            self.results["copy_destination"] = copies
        return self.results["copy_destination"]

    def copy_title(self):
        return "cp -r (out, to tmpfs)" if self.copy_destination() != self.tmp else "cp -r (out)"

    def copy_out(self, layout):
        destination = os.path.join(self.copy_destination(), "copy-" + layout.name)
        shutil.rmtree(destination, ignore_errors=True)
        seconds, out = timed_shell(f"cp -r '{layout.root}' '{destination}'")
        shutil.rmtree(destination, ignore_errors=True)
        os.sync()
        return seconds, out

    def read_only_rows(self):
        """The same binder remounted with --read-only (no OPEN, no FLUSH: issue 46) for grep -r,
        tar c and cp -r, warm and cold, beside plain, gocryptfs and the empty FUSE file system
        without OPEN and FLUSH; then mounted read-write again for the rows after these. One
        binder has one mount: the read-write one is unmounted first."""
        o = self.options
        reps = {"warm": o.reps, "cold": o.cold_reps}
        binder = self.layouts["binder"]
        binder.unmount()
        binder.mount(read_only=True)
        names = ("plain", "gocryptfs", FLOOR_NO_OPEN, "binder")

        def measure(title, op, check=None):
            # Two untimed passes: without OPEN, the second still found pages to read (scripts/fuse-floor).
            self.measure_row(f"{title} (read-only mount)", op, ("warm", "cold"), reps, check=check, names=names,
                             floor=FLOOR_NO_OPEN, warmups=2)
        try:
            measure("grep -r", self.shell_op(f"grep -r {MARKER} . | wc -l"), check=self.check_grep)
            measure("tar c", self.shell_op("tar cf - . | wc -c"))
            measure(self.copy_title(), self.copy_out)
        finally:
            binder.unmount()
            binder.mount()
            for name in (FLOOR, FLOOR_NO_OPEN):   # not timed after these rows: out of the machine's way
                self.layouts[name].unmount()

    def mount_rows(self):
        reps = {"warm": self.options.reps, "cold": self.options.cold_reps}
        for mode in ("warm", "cold"):
            row = {"mode": mode, "unit": "s", "samples": {n: [] for n in LAYOUTS}, "capped": {}}
            self.results["rows"][f"mount until first ls, {mode}"] = row
            for rep in range(reps[mode]):
                for name in self.rotation(rep):
                    layout = self.layouts[name]
                    layout.unmount()
                    if mode == "cold":
                        drop_caches()
                    seconds, _ = timed_shell(layout.mount_command(), env=getattr(layout, "env", None))
                    if name == "binder":
                        layout.mounted_in = layout.phase
                    row["samples"][name].append(seconds)
            log(f"mount until first ls, {mode}: " + ", ".join(f"{n} {statistics.median(row['samples'][n]):.3f}" for n in LAYOUTS))

    def memory(self):
        """Daemon memory after everything was read once, with the default cache and a small one."""
        binder, gocrypt = self.layouts["binder"], self.layouts["gocryptfs"]
        memory = {"plaintext_bytes": self.manifest["plaintext_bytes"]}
        for label, cache in (("default cache (256M)", None), ("--cache-size 32M", "32M")):
            binder.unmount()
            binder.mount(cache_size=cache)
            pid = binder.pid()
            after_mount = kib(status_of(pid).get("VmRSS")) if pid else 0
            shell("tar cf - . | wc -c", cwd=binder.root)
            fields = status_of(pid) if pid else {}
            st = binder.status()
            try:
                maps = len(open(f"/proc/{pid}/maps").read().splitlines())
            except OSError:
                maps = None
            if not fields or maps is None:
                raise BenchError(f"the binder daemon ({pid}) is gone after reading everything with {label}; "
                                 f"see {os.path.join(self.out, 'binder-daemon.log')}")
            memory[label] = {"pid": pid, "VmHWM_kib": kib(fields.get("VmHWM")), "VmRSS_kib": kib(fields.get("VmRSS")),
                             "RssAnon_kib": kib(fields.get("RssAnon")), "RssFile_kib": kib(fields.get("RssFile")),
                             "VmRSS_after_mount_kib": after_mount,
                             "cached_bytes": int(st.get("cached_bytes", 0)), "cached_entries": int(st.get("cached_entries", 0)),
                             "cache_capacity": (32 << 20) if cache else (256 << 20), "maps": maps}
            log(f"binder daemon, {label}: VmHWM {memory[label]['VmHWM_kib'] / 1024:.0f} MiB, "
                f"cached {memory[label]['cached_bytes'] / 2**20:.0f} MiB")
        binder.unmount()
        binder.mount()
        gocrypt.unmount()
        gocrypt.mount()
        shell("tar cf - . | wc -c", cwd=gocrypt.root)
        pid = gocrypt.pid()
        fields = status_of(pid) if pid else {}
        memory["gocryptfs"] = {"pid": pid, "VmHWM_kib": kib(fields.get("VmHWM")), "VmRSS_kib": kib(fields.get("VmRSS"))}
        self.results["memory"] = memory

    def enter(self, phase):
        """Names the part of the run the binder daemons' peaks are sampled in."""
        log(f"-- {phase}")
        if "binder" in self.layouts:
            self.layouts["binder"].phase = phase

    def record_whole_run_memory(self):
        """The highest VmHWM of every binder daemon this run started (sampled before each unmount
        and now, at the end), for the default cache and for --cache-size 32M, against the
        corpus's plaintext + 64 MiB (issue 46)."""
        binder = self.layouts.get("binder")
        if not binder:
            return
        binder.sample_peak("at the end of the run")
        peaks = {}
        for label, cache in (("default cache", None), ("--cache-size 32M", "32M")):
            samples = [p for p in binder.peaks if p["cache_size"] == cache]
            if samples:
                top = max(samples, key=lambda p: p["VmHWM_kib"])
                peaks[label] = dict(top, daemons=len({p["pid"] for p in samples}))
        self.results["memory_whole_run"] = {"plaintext_bytes": self.manifest["plaintext_bytes"],
                                            "limit_bytes": self.manifest["plaintext_bytes"] + MEMORY_HEADROOM,
                                            "peaks": peaks, "samples": binder.peaks}

    def save_rows(self):
        """`--saves` editor-style saves of one record in the largest folder, interleaved save by
        save; p50, p99 and p999 per layout (issue 46: from at least 5,000 saves)."""
        target = self.manifest["save_target"]
        original = open(os.path.join(self.corpus, target), "rb").read()
        latencies = {n: [] for n in LAYOUTS}
        capped = {}
        for i in range(self.options.saves):
            content = original + f"\nSaved {i}.\n".encode()
            for name in self.rotation(i):
                if name in capped:
                    continue
                latencies[name].append(atomic_save(os.path.join(self.layouts[name].root, target), content))
                spent = sum(latencies[name])
                if spent > self.options.slow_limit * 4 and i + 1 < self.options.saves:
                    capped[name] = f"{len(latencies[name])} saves: {spent:.0f} s spent"
        for name in LAYOUTS:
            got = open(os.path.join(self.layouts[name].root, target), "rb").read()
            if b"Saved" not in got:
                raise BenchError(f"{name}: the saved record does not show the save")
        self.results["rows"]["save (temp + fsync + rename), per save"] = {
            "mode": "warm", "unit": "s", "samples": latencies, "capped": capped,
            "p50": {n: percentile(v, 50) for n, v in latencies.items()},
            "p99": {n: percentile(v, 99) for n, v in latencies.items()},
            "p999": {n: percentile(v, 99.9) for n, v in latencies.items()}}
        log("save p50/p99/p999 ms: " + ", ".join(f"{n} {percentile(v, 50) * 1e3:.1f}/{percentile(v, 99) * 1e3:.1f}/"
                                                 f"{percentile(v, 99.9) * 1e3:.1f}" for n, v in latencies.items()))

    def write_rows(self):
        count = self.options.writes
        for sync in (False, True):
            title = f"write {count} new 4 KB records{', fsync each' if sync else ''}"
            row = {"mode": "warm", "unit": "s", "samples": {n: [] for n in LAYOUTS}, "capped": {},
                   "per_file_p50": {n: [] for n in LAYOUTS}, "per_file_p99": {n: [] for n in LAYOUTS}}
            self.results["rows"][title] = row
            for rep in range(self.options.write_reps):
                for name in self.rotation(rep):
                    if name in row["capped"]:
                        continue
                    folder = os.path.join(self.layouts[name].root, f"notes-{'sync' if sync else 'nosync'}-{rep}")
                    os.mkdir(folder)
                    seconds, latencies = write_records(folder, count, sync)
                    row["samples"][name].append(seconds)
                    row["per_file_p50"][name].append(percentile(latencies, 50))
                    row["per_file_p99"][name].append(percentile(latencies, 99))
                    if seconds > self.options.slow_limit and rep + 1 < self.options.write_reps:
                        row["capped"][name] = f"1 sample: it took {seconds:.0f} s"
                log(f"{title}, rep {rep + 1}: " + ", ".join(f"{n} {row['samples'][n][-1]:.2f}" for n in LAYOUTS if row["samples"][n]))
            if sync is False:
                # Check the records are really there (and readable) in every layout.
                for name in LAYOUTS:
                    folder = os.path.join(self.layouts[name].root, "notes-nosync-0")
                    if len(os.listdir(folder)) != count:
                        raise BenchError(f"{name}: {len(os.listdir(folder))} records written, expected {count}")

    def export_rows(self):
        """`binder export --format pdf` of 1,000 of the corpus's records (issue 18), read from the
        binder's git (mounted, but not through the mount); the other layouts have no such row."""
        records = [f for f in self.manifest["files"] if f.endswith(".md")][:EXPORT_RECORDS]
        if len(records) < EXPORT_RECORDS:
            self.results["notes"].append(f"export row skipped: the corpus has fewer than {EXPORT_RECORDS:,} records")
            return
        binder = self.layouts["binder"]
        title = f"binder export --format pdf, {EXPORT_RECORDS:,} records"
        row = {"mode": "warm", "unit": "s", "samples": {n: [] for n in LAYOUTS}, "capped": {}}
        self.results["rows"][title] = row
        os.makedirs(self.tmp, exist_ok=True)
        target = os.path.join(self.tmp, "export.pdf")
        for rep in range(self.options.reps):
            if os.path.exists(target):
                os.remove(target)
            start = time.perf_counter()
            result = binder.cli("export", "--binder", BINDER_NAME, "--format", "pdf", "--output", target, *records)
            row["samples"]["binder"].append(time.perf_counter() - start)
            if f"exported {EXPORT_RECORDS} records" not in result.stdout:
                raise BenchError(f"binder export: {result.stdout.strip()}")
        pages = re.search(r"^Pages:\s+(\d+)", run(["pdfinfo", target], check=False).stdout, re.M) if shutil.which("pdfinfo") else None
        row["note"] = f"{os.path.getsize(target) / 1e6:.1f} MB" + (f", {pages.group(1)} pages" if pages else "")
        os.remove(target)
        log(f"{title}: " + ", ".join(f"{s:.2f}" for s in row["samples"]["binder"]) + f" s ({row['note']})")

    def import_rows(self):
        """`binder import` of a 1 MB CCD (issue 41: under 2 s) into a new, unmounted binder each
        time: the test CCD with its lipid panel repeated on successive days (a record each)."""
        binder = self.layouts["binder"]
        if binder.cli("import", "--help", check=False).returncode != 0:
            self.results["notes"].append(f"{binder.binary} has no `binder import`: the CCD import row was not measured")
            return
        text, panels = large_ccd()
        os.makedirs(self.tmp, exist_ok=True)
        source = os.path.join(self.tmp, "large-ccd.xml")
        with open(source, "w", encoding="utf-8") as f:
            f.write(text)
        title = f"binder import of a {len(text.encode()) / 1e6:.1f} MB CCD ({panels} lab panels), goal < 2 s"
        row = {"mode": "warm", "unit": "s", "samples": {n: [] for n in LAYOUTS}, "capped": {}}
        self.results["rows"][title] = row
        for rep in range(self.options.reps):
            name = f"import-bench-{rep}"
            binder.cli("create", name, "--patient-name", "Mei-Ling Chen", "--dob", "1985-02-14")
            start = time.perf_counter()
            result = binder.cli("import", source, "--binder", name, "--json")
            row["samples"]["binder"].append(time.perf_counter() - start)
            made = sum(json.loads(result.stdout)["recordsPerFolder"].values())
            if made < panels:
                raise BenchError(f"binder import made {made} records, expected at least {panels}")
            shutil.rmtree(os.path.join(binder.home, "binders", name), ignore_errors=True)
        row["note"] = f"{made} records in one commit"
        os.remove(source)
        log(f"{title}: " + ", ".join(f"{s:.2f}" for s in row["samples"]["binder"]) + f" s ({row['note']})")

    def folder_import_rows(self):
        """`binder import` of a folder of --folder-files files (generate_folder) into a new,
        unmounted binder each time, beside `cp -r` of the same folder into a new gocryptfs mount
        and into a plain folder (issue 41: at most 5x gocryptfs), each followed by sync, the
        layouts in turn in each repetition."""
        o = self.options
        binder = self.layouts.get("binder") or Binder(os.path.join(self.out, "folder-import"), self.binaries["binder"])
        if "binder" not in self.layouts:
            # Alone (--folder-import-only): a key and its cached unlock, no mount.
            shutil.rmtree(binder.base, ignore_errors=True)
            os.makedirs(binder.home)
            pw = "/dev/fd/0"
            run([binder.binary, "key", "generate", "--passphrase-file", pw], env=binder.env, input=PASSWORD + "\n")
            run([binder.binary, "unlock", "--timeout", "8h", "--passphrase-file", pw], env=binder.env, input=PASSWORD + "\n")
            self.cleanup_paths.append(binder.base)
        if binder.cli("import", "--help", check=False).returncode != 0:
            self.results["notes"].append(f"{binder.binary} has no `binder import`: the folder import row was not measured")
            return
        base = os.path.join(self.out, "folder-import")
        folder = os.path.join(base, "source")
        log(f"folder row: generating {o.folder_files:,} files")
        made = generate_folder(folder, o.folder_files, o.seed)
        self.results["folder_import"] = made
        gocrypt, plain = Gocryptfs(base), Plain(base)
        self.cleanup_paths.append(base)
        kinds = ", ".join(f"{made['by_kind'].get(k, 0):,} {k}" for k, _ in FOLDER_MIX)
        title = f"folder of {o.folder_files:,} files imported ({kinds}; {made['bytes'] / 1e6:.0f} MB): binder import, others cp -r; then sync"
        row = {"mode": "warm", "unit": "s", "samples": {n: [] for n in LAYOUTS}, "capped": {}}
        self.results["rows"][title] = row
        shell(f"cat $(find '{folder}' -type f) > /dev/null")   # the source warm in the page cache for all
        for rep in range(o.folder_reps):
            for name in self.rotation(rep):
                if name == "binder":
                    binder_name = f"folder-import-{rep}"
                    binder.cli("create", binder_name, "--patient-name", "Bench Patient", "--dob", "1980-01-01")
                    os.sync()
                    start = time.perf_counter()
                    # --max-size: the folder is over the default limit of a source (64 MiB) on purpose.
                    result = binder.cli("import", folder, "--binder", binder_name, "--json", "--max-size", str(2 * made["bytes"]))
                    os.sync()
                    row["samples"]["binder"].append(time.perf_counter() - start)
                    stored = len(json.loads(result.stdout).get("created", []))
                    if stored < o.folder_files:
                        raise BenchError(f"binder import of the folder stored {stored} items, expected {o.folder_files}")
                    shutil.rmtree(os.path.join(binder.home, "binders", binder_name), ignore_errors=True)
                else:
                    layout = gocrypt if name == "gocryptfs" else plain
                    layout.setup()
                    os.sync()
                    seconds, _ = timed_shell(layout.import_command(folder), timeout=4 * 3600)
                    row["samples"][name].append(seconds)
                    if len(list_files(layout.root)) != o.folder_files:
                        raise BenchError(f"{name}: cp -r gave {len(list_files(layout.root))} files, expected {o.folder_files}")
                    layout.unmount()
                    shutil.rmtree(getattr(layout, "base", layout.root), ignore_errors=True)
        log(f"{title}: " + "; ".join(f"{n} " + ", ".join(f"{v:.1f}" for v in row["samples"][n]) + " s" for n in LAYOUTS))

    def views_rows(self):
        """`.binder/` (binder only): the timeline of every record, and the history of one record
        saved `--history-versions` times, each listed with `ls -l`; goal under a second."""
        binder = self.layouts["binder"]
        o = self.options
        folder = os.path.join(binder.root, "views-history")
        os.makedirs(folder, exist_ok=True)
        record = os.path.join(folder, "record.md")
        log(f"views: saving one record {o.history_versions} times")
        for i in range(o.history_versions):
            atomic_save(record, f"---\ntype: note\n---\n# Version {i}\n\n{record_text(i)}".encode())
        listings = {
            f"views: ls -l .binder/timeline ({self.manifest['entries'] + self.manifest['attachments']} records)":
                (f"ls -l '{binder.root}/.binder/timeline' | wc -l", self.manifest["entries"]),
            f"views: ls -l .binder/history of a record with {o.history_versions} versions":
                (f"ls -l '{binder.root}/.binder/history/views-history/record.md' | wc -l", o.history_versions),
        }
        for title, (command, at_least) in listings.items():
            for mode, count in (("cold", o.cold_reps), ("warm", o.reps)):
                row = {"mode": mode, "unit": "s", "samples": {"binder": []}, "capped": {}}
                self.results["rows"][f"{title}, {mode}"] = row
                if mode == "warm":
                    shell(command)
                for _ in range(count):
                    if mode == "cold":
                        self.prepare_cold(binder)
                    seconds, output = timed_shell(command)
                    if int(output.strip()) < at_least:
                        raise BenchError(f"{title}: {output.strip()} lines, expected at least {at_least}")
                    row["samples"]["binder"].append(seconds)
                log(f"{title}, {mode}: " + ", ".join(f"{s:.3f}" for s in row["samples"]["binder"]))
        # After a save the tip has moved: the walks extend the last one over the new commit
        # instead of walking the whole history again (each sample: one save, then the listing).
        commits = int(run(["git", "-C", os.path.join(binder.home, "binders", BINDER_NAME), "rev-list", "--count", "HEAD"]).stdout.strip())
        after_save = {
            f"views: ls -l .binder/deleted just after a save ({commits:,} commits)":
                (f"ls -l '{binder.root}/.binder/deleted' | wc -l", 1),
            f"views: ls -l .binder/history of a record with {o.history_versions} versions, just after a save to it":
                (f"ls -l '{binder.root}/.binder/history/views-history/record.md' | wc -l", o.history_versions),
        }
        for title, (command, at_least) in after_save.items():
            row = {"mode": "warm", "unit": "s", "samples": {"binder": []}, "capped": {}}
            self.results["rows"][title] = row
            shell(command)
            for i in range(o.reps):
                atomic_save(record, f"---\ntype: note\n---\n# After {i}\n\n{record_text(i)}".encode())
                seconds, output = timed_shell(command)
                if int(output.strip()) < at_least:
                    raise BenchError(f"{title}: {output.strip()} lines, expected at least {at_least}")
                row["samples"]["binder"].append(seconds)
            log(f"{title}: " + ", ".join(f"{s:.3f}" for s in row["samples"]["binder"]))

    def primitives(self):
        tool = self.binaries.get("binder-bench")
        if not tool:
            self.results["notes"].append("binder-bench not built: primitives not measured")
            return
        args = [tool] + (["--quick"] if self.options.quick else [])
        self.results["primitives"] = json.loads(run(args, timeout=1800).stdout)
        p = self.results["primitives"]
        log(f"primitives: NIP-44 decrypt 4 KB {p['nip44_decrypt_4k_us']:.1f} µs, sidecar {p['sidecar_decrypt_3m_mb_s']:.0f} MB/s, "
            f"ChaCha20 {p['chacha20_raw_mb_s']:.0f} MB/s")

    def clean_up(self, keep):
        for layout in self.layouts.values():
            try:
                layout.unmount()
            except Exception as error:  # keep unmounting the others
                log(f"unmounting {layout.name}: {error}")
        if "binder" in self.layouts:
            self.layouts["binder"].save_log(self.out)
            self.layouts["binder"].lock()
        for path in self.cleanup_paths:
            shutil.rmtree(path, ignore_errors=True)
        if not keep:
            for path in ("plain", "gocryptfs", "binder", "corpus", "tmp"):
                shutil.rmtree(os.path.join(self.out, path), ignore_errors=True)

    # -- the run ------------------------------------------------------------------------------

    def run(self):
        o = self.options
        os.makedirs(self.out, exist_ok=True)
        self.prepare_tools()
        started = time.time()
        self.results["machine"] = self.machine()
        self.results["options"] = {k: v for k, v in vars(o).items()}
        self.results["command"] = "scripts/bench " + " ".join(sys.argv[1:])
        try:
            if o.folder_import_only:
                self.folder_import_rows()
                self.results["machine"]["load_at_end"] = open("/proc/loadavg").read().split()[:3]
                print(self.table())
                return
            log(f"corpus: {o.entries} entries, {o.attachments} attachments, seed {o.seed}")
            self.manifest = generate_corpus(self.corpus, o.entries, o.attachments, o.seed, one_folder=o.one_folder)
            self.results["corpus"] = {k: v for k, v in self.manifest.items() if k not in ("files",)}
            if not (o.views_only or o.import_only):
                # The primitives first, while nothing else runs: at the end a mounted binder may
                # still be folding packs or writing its listing index after the write rows.
                os.sync()
                self.primitives()
            if o.views_only:
                self.set_up_binder_in_bulk()
                self.views_rows()
                return
            self.set_up_layouts()
            if o.import_only:
                return
            for phase, step in (("read rows", self.read_rows), ("read-only rows", self.read_only_rows),
                                ("mount rows", self.mount_rows), ("memory after tar", self.memory),
                                ("saves", self.save_rows), ("writes", self.write_rows), ("views", self.views_rows),
                                ("export", self.export_rows), ("import of a CCD", self.import_rows),
                                ("import of a folder", self.folder_import_rows)):
                self.enter(phase)
                step()
        finally:
            try:
                self.record_whole_run_memory()
            except Exception as error:  # the results are still written
                log(f"no whole-run memory: {error}")
            self.results["machine"]["load_at_end"] = open("/proc/loadavg").read().split()[:3]
            self.results["seconds"] = time.time() - started
            self.write_results()
            self.clean_up(o.keep)
        print(self.table())

    # -- report -------------------------------------------------------------------------------

    def write_results(self):
        path = os.path.join(self.out, "results.json")
        with open(path, "w") as f:
            json.dump(self.results, f, indent=1, default=str)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        shutil.copy(path, os.path.join(self.out, f"results-{stamp}.json"))
        try:
            with open(os.path.join(self.out, "results.md"), "w") as f:
                f.write(self.table() + "\n")
        except Exception as error:  # a partial run still keeps its JSON
            log(f"no table: {error}")
        log(f"raw samples: {path}")

    def table(self):
        return render_table(self.results)


# ---------------------------------------------------------------------------------------------
# The table and the goals
# ---------------------------------------------------------------------------------------------

def fmt_seconds(s):
    if s is None:
        return "—"
    if s >= 10:
        return f"{s:.1f} s"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 0.01:
        return f"{s * 1e3:.0f} ms"
    return f"{s * 1e3:.2f} ms"


def cell(samples):
    s = summary(samples)
    if not s:
        return "—"
    if s["n"] == 1:
        return fmt_seconds(s["median"])
    return f"{fmt_seconds(s['median'])} ({fmt_seconds(s['min'])}–{fmt_seconds(s['max'])})"


def ratio(a, b):
    if not a or not b:
        return None
    return statistics.median(a) / statistics.median(b)


def fmt_ratio(r):
    return "—" if r is None else (f"{r:.1f}x" if r < 100 else f"{r:.0f}x")


# Issue 46's goals (docs/BENCHMARKS.md, "Goals"), by row title: (against what, limit, text).
# "floor": binder's median at most `limit` times the row's empty FUSE file system's (with
# binder's options for the read-write rows, without OPEN and FLUSH for the read-only ones);
# "plain"/"gocryptfs": at most `limit` times that layout's; "seconds": under `limit` seconds.
COPY_TITLES = ("cp -r (out)", "cp -r (out, to tmpfs)")
READ_ONLY_ROWS = ("grep -r", "tar c") + COPY_TITLES
GOALS = [
    *[(f"{t}, warm", "floor", 1.15, "≤ 1.15x floor") for t in ("grep -r", "ls -lR", *COPY_TITLES, "tar c",
                                                               "3 MB attachment read x20")],
    ("grep -r, cold", "plain", 2.0, "≤ 2x plain"), ("ls -lR, cold", "plain", 3.0, "≤ 3x plain"),
    *[(f"{t}, cold", "plain", 2.0, "≤ 2x plain") for t in (*COPY_TITLES, "tar c")],
    ("3 MB attachment read x20, cold", "gocryptfs", 2.0, "≤ 2x gocryptfs"),
    ("import (cp -r corpus in, then sync)", "gocryptfs", 5.0, "≤ 5x gocryptfs"),
    *[(f"{t} (read-only mount), warm", "floor", 1.2, "≤ 1.2x floor, no OPEN") for t in READ_ONLY_ROWS],
    *[(f"{t} (read-only mount), warm", "plain", 1.6, "≤ 1.6x plain") for t in READ_ONLY_ROWS],
    *[(f"{t} (read-only mount), cold", "plain", 2.0, "≤ 2x plain") for t in READ_ONLY_ROWS],
]
SAVES_FOR_A_VERDICT = 5000   # issue 46: the save goals are judged on at least 5,000 saves
SAVE_P50_LIMIT = 0.0025


def goals_for(title):
    wanted = [(against, limit, text) for name, against, limit, text in GOALS if name == title]
    if title.startswith("folder of ") and " files imported " in title:
        wanted.append(("gocryptfs", 5.0, "≤ 5x gocryptfs cp -r"))
    if title.startswith("ls -l of one folder") and title.endswith("cold"):
        wanted.append(("seconds", 2.0, "first ls -l < 2 s"))
    if title.startswith("ls -l of one folder") and title.endswith("warm"):
        wanted.append(("floor", 1.15, "≤ 1.15x floor"))
    return wanted


def table_line(title, values=None, ratios=("", "", ""), goal=""):
    """A row of the table: `values` (text) by column name, then binder/floor, binder/plain and
    binder/gocryptfs, then the goal."""
    values = values or {}
    return "| " + " | ".join([title, *(values.get(n, "") for n in COLUMNS), *ratios, goal]) + " |"


def median_of(samples):
    return statistics.median(samples) if samples else None


def save_lines(title, row, verdicts):
    """The save row: p50, p99 and p999 per layout; binder's p50 ≤ 2.5 ms and p99 ≤ gocryptfs's."""
    lines = []
    saves = len(row["samples"].get("binder", []))
    enough = saves >= SAVES_FOR_A_VERDICT
    short = "" if enough else f" (judged on ≥ {SAVES_FOR_A_VERDICT:,} saves; {saves:,} here)"
    for p in ("p50", "p99", "p999"):
        values = {n: row.get(p, {}).get(n) for n in LAYOUTS}
        b, plain, gocrypt = values["binder"], values["plain"], values["gocryptfs"]
        goal = ""
        if p == "p50" and b is not None:
            met = b <= SAVE_P50_LIMIT and enough
            goal = f"p50 ≤ 2.5 ms{short}: {'met' if met else 'NOT met'}"
            verdicts.append((f"save p50 ({fmt_seconds(b)}, {saves:,} saves)", met))
        if p == "p99" and b is not None:
            met = gocrypt is not None and b <= gocrypt and enough
            goal = f"p99 ≤ gocryptfs' p99{short}: {'met' if met else 'NOT met'}"
            verdicts.append((f"save p99 ({fmt_seconds(b)} against gocryptfs' {fmt_seconds(gocrypt)}, {saves:,} saves)", met))
        lines.append(table_line(
            f"{title.replace('per save', p)} ({saves:,} saves)", {n: fmt_seconds(v) for n, v in values.items()},
            ("", fmt_ratio(b / plain if plain and b else None), fmt_ratio(b / gocrypt if gocrypt and b else None)), goal))
    return lines


def timed_row_line(title, row, verdicts):
    samples = row["samples"]
    binder = samples.get("binder")
    floor = row.get("floor")
    rf = ratio(binder, samples.get(floor)) if floor else None
    rp, rg = ratio(binder, samples.get("plain")), ratio(binder, samples.get("gocryptfs"))
    goals = []
    for against, limit, text in goals_for(title):
        if against == "seconds":
            b = median_of(binder)
            met, shown = b is not None and b < limit, fmt_seconds(b)
        else:
            r = {"floor": rf, "plain": rp, "gocryptfs": rg}[against]
            met, shown = r is not None and r <= limit, f"{fmt_ratio(r)} {COLUMN_TITLES.get(floor, floor) if against == 'floor' else against}"
        goals.append(f"{text}: {'met' if met else 'NOT met'}")
        verdicts.append((f"{title} ({shown})", met))
    b = median_of(binder)
    if title.startswith("write") and "fsync" in title:
        met = rg is not None and rg <= 1.0
        goals.append(f"≤ gocryptfs+fsync: {'met' if met else 'NOT met'}")
        verdicts.append((f"{title} ({fmt_ratio(rg)} gocryptfs)", met))
    if title.startswith("views:"):
        goals.append(f"< 1 s: {'met' if b is not None and b < 1.0 else 'NOT met'}")
    if title.startswith("binder export"):
        met = b is not None and b < 30
        goals.append(f"< 30 s ({row.get('note', '')}): {'met' if met else 'NOT met'}")
        verdicts.append((f"{title} ({fmt_seconds(b)})", met))
    if title.startswith("mount until first ls"):
        met = b is not None and b < 0.5
        goals.append(f"< 0.5 s: {'met' if met else 'NOT met'}")
        verdicts.append((f"{title} ({fmt_seconds(b)})", met))
    extra = ""
    if row.get("capped"):
        extra = " (capped: " + "; ".join(f"{n} {why}" for n, why in row["capped"].items()) + ")"
    per_file = ""
    if "per_file_p50" in row:
        per_file = " — per file p50: " + ", ".join(f"{n} {fmt_seconds(statistics.median(v))}" for n, v in row["per_file_p50"].items() if v)
    values = {n: cell(samples.get(n)) if n in samples else "" for n in COLUMNS}
    return table_line(f"{title}{extra}{per_file}", values,
                      (fmt_ratio(rf) if floor else "", fmt_ratio(rp), fmt_ratio(rg)), "; ".join(goals))


def memory_lines(results, verdicts):
    lines = []
    memory = results.get("memory")
    if memory:
        for label in ("default cache (256M)", "--cache-size 32M"):
            m = memory.get(label)
            if not m:
                continue
            hwm = m["VmHWM_kib"] * 1024
            # The cache within its bound, under 1,000 mappings (issue 13); the peak's goal is the
            # whole run's (below).
            met = m["cached_bytes"] <= m["cache_capacity"] and (m.get("maps") or 0) < 1000
            verdicts.append((f"daemon after reading everything, {label}: cache {m['cached_bytes'] / 2**20:.0f} of "
                             f"{m['cache_capacity'] / 2**20:.0f} MiB, {m.get('maps')} mappings", met))
            anon = f", anonymous {m['RssAnon_kib'] / 1024:.0f} MiB, file-backed {m['RssFile_kib'] / 1024:.0f} MiB at the end" if m.get("RssAnon_kib") else ""
            lines.append(table_line(
                f"daemon peak memory (VmHWM) after reading everything, {label}",
                {"plain": "—", "gocryptfs": f"{memory['gocryptfs']['VmHWM_kib'] / 1024:.0f} MiB",
                 "binder": f"{hwm / 2**20:.0f} MiB (cache {m['cached_bytes'] / 2**20:.0f} of "
                           f"{m['cache_capacity'] / 2**20:.0f} MiB{anon}; {m.get('maps')} mappings)"},
                goal=f"cache bound holds, < 1,000 mappings: {'met' if met else 'NOT met'}"))
    whole = results.get("memory_whole_run")
    if whole:
        limit = whole["limit_bytes"]
        for label, peak in whole["peaks"].items():
            hwm = peak["VmHWM_kib"] * 1024
            met = hwm <= limit
            verdicts.append((f"daemon peak over the whole run, {label} (VmHWM {hwm / 2**20:.0f} MiB, limit "
                             f"{limit / 2**20:.0f} MiB)", met))
            lines.append(table_line(
                f"daemon peak memory (VmHWM) over the whole run, {label} ({peak['daemons']} "
                f"daemon{'' if peak['daemons'] == 1 else 's'})",
                {"binder": f"{hwm / 2**20:.0f} MiB (the daemon mounted for {peak['mounted_in']}, "
                           f"sampled in {peak['sampled_in']})"},
                goal=f"≤ plaintext + 64 MiB ({limit / 2**20:.0f} MiB): {'met' if met else 'NOT met'}"))
    return lines


def primitive_lines(prims, verdicts):
    lines = []
    met = prims["nip44_decrypt_4k_us"] <= 25
    verdicts.append((f"NIP-44 decrypt 4 KB ({prims['nip44_decrypt_4k_us']:.0f} µs)", met))
    lines.append(table_line("NIP-44 decrypt, 4 KB, key cached", {"binder": f"{prims['nip44_decrypt_4k_us']:.1f} µs"},
                            goal=f"≤ 25 µs: {'met' if met else 'NOT met'}"))
    lines.append(table_line("NIP-44 encrypt, 4 KB, key cached", {"binder": f"{prims['nip44_encrypt_4k_us']:.1f} µs"}))
    met = prims["sidecar_decrypt_3m_mb_s"] >= 500
    verdicts.append((f"sidecar decrypt ({prims['sidecar_decrypt_3m_mb_s']:.0f} MB/s)", met))
    lines.append(table_line("sidecar decrypt, 3 MB", {"binder": f"{prims['sidecar_decrypt_3m_mb_s']:.0f} MB/s"},
                            goal=f"≥ 500 MB/s: {'met' if met else 'NOT met'} (raw ChaCha20: {prims['chacha20_raw_mb_s']:.0f} MB/s)"))
    if "sidecar_encrypt_3m_mb_s" in prims:
        lines.append(table_line("sidecar encrypt, 3 MB", {"binder": f"{prims['sidecar_encrypt_3m_mb_s']:.0f} MB/s"}))
    lines.append(table_line("sidecar size (listing, no full decrypt), 3 MB", {"binder": f"{prims['sidecar_size_us']:.0f} µs"}))
    lines.append(table_line("SecureBytes allocation (arena, allocate+free), 4 KB",
                            {"binder": f"{prims['securebytes_alloc_4k_us']:.2f} µs"}))
    if "arena_100k_maps" in prims:
        met = prims["arena_100k_maps"] < 1000
        verdicts.append((f"mappings with 100,000 secrets ({prims['arena_100k_maps']})", met))
        lines.append(table_line(
            "100,000 secrets of 0.2–4 KB held at once: process mappings",
            {"binder": f"{prims['arena_100k_maps']} (before: {prims['arena_maps_before']}; {prims['arena_100k_mib']:.0f} MiB in "
                       f"{prims['arena_100k_regions']} regions)"},
            goal=f"< 1,000: {'met' if met else 'NOT met'}"))
    return lines


def render_table(results):
    titles = [COLUMN_TITLES.get(n, n) for n in COLUMNS]
    lines = ["| measure | " + " | ".join(titles) + " | binder/floor | binder/plain | binder/gocryptfs | goal |",
             "|---" * (len(COLUMNS) + 5) + "|"]
    verdicts = []
    for title, row in results["rows"].items():
        if "p50" in row:      # the save row: latencies
            lines.extend(save_lines(title, row, verdicts))
        else:
            lines.append(timed_row_line(title, row, verdicts))
    lines.extend(memory_lines(results, verdicts))
    if results.get("primitives"):
        lines.extend(primitive_lines(results["primitives"], verdicts))
    corpus = results.get("corpus", {})
    machine = results.get("machine", {})
    head = [f"binder benchmark — {machine.get('date', '')}, {machine.get('nproc')} × {machine.get('cpu')}, "
            f"kernel {machine.get('kernel')}, disk {machine.get('disk')}, scripts/bench at {machine.get('binder_commit')}, "
            f"binary {machine.get('binder_binary')}",
            (f"corpus: {corpus.get('entries')} entries ({corpus.get('entry_bytes', 0) / 1e6:.0f} MB, median "
             f"{corpus.get('entry_median_bytes', 0) / 1e3:.1f} KB), {corpus.get('attachments')} attachments "
             f"({corpus.get('attachment_bytes', 0) / 1e6:.0f} MB), seed {corpus.get('seed')}; " if corpus else
             "the folder import row alone (--folder-import-only); ")
            + f"median (min–max) of the samples; load {machine.get('load_at_start')} → {machine.get('load_at_end')}",
            "floor: an empty FUSE file system (scripts/fuse-floor.c) serving the corpus from memory with binder's "
            "options; floor, no OPEN: the same answering OPEN and FLUSH with ENOSYS, as a read-only binder does; "
            "binder/floor is against the row's floor", ""]
    repository = results.get("binder_repository")
    if repository and repository["ciphertext_bytes"]:
        r = repository["repository_bytes"] / repository["ciphertext_bytes"]
        met = r <= 1.3
        verdicts.append((f"repository on disk ({repository['repository_bytes'] / 1e6:.0f} MB for "
                         f"{repository['ciphertext_bytes'] / 1e6:.0f} MB of ciphertext, {r:.2f}x)", met))
        objects = dict(line.split(": ", 1) for line in repository["count_objects"].splitlines() if ": " in line)
        lines.append(table_line(
            "repository on disk (bare; against the ciphertext its tree holds)",
            {"binder": f"{repository['repository_bytes'] / 1e6:.0f} MB for {repository['ciphertext_bytes'] / 1e6:.0f} MB "
                       f"({objects.get('count', '?')} loose objects, {objects.get('packs', '?')} packs)"},
            goal=f"≤ 1.3x the ciphertext ({r:.2f}x): {'met' if met else 'NOT met'}"))
    tail = ["", "Goals:"] + [f"- {'met' if met else 'NOT met'}: {text}" for text, met in verdicts]
    if results.get("disk_bytes"):
        tail.append("")
        tail.append("Disk (whole layout): " + ", ".join(f"{n} {v / 1e6:.0f} MB" for n, v in results["disk_bytes"].items()))
    for note in results.get("notes", []):
        tail.append(f"Note: {note}")
    return "\n".join(head + lines + tail)


def main():
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="BINDER_BIN_DIR=DIR uses DIR/binder (and DIR/binder-bench if present) "
                                            "instead of .build/release.")
    parser.add_argument("--quick", action="store_true", help="2,000 entries, fewer repetitions (a few minutes)")
    parser.add_argument("--entries", type=int, help="number of markdown entries (default 10,000; 2,000 with --quick)")
    parser.add_argument("--attachments", type=int, help="number of attachments, 200 KB to 3 MB (default 40; 10 with --quick)")
    parser.add_argument("--seed", type=int, default=6, help="corpus seed (default 6)")
    parser.add_argument("--out", default=os.path.join(ROOT, ".bench"), help="working folder and results (default .bench/)")
    parser.add_argument("--no-build", action="store_true", help="use the binaries already built")
    parser.add_argument("--reps", type=int, help="warm repetitions per layout (default 5; 3 with --quick)")
    parser.add_argument("--cold-reps", type=int, help="cold repetitions per layout (default 3; 2 with --quick)")
    parser.add_argument("--writes", type=int, help="new records written per sample (default 1,000; 200 with --quick)")
    parser.add_argument("--write-reps", type=int, help="repetitions of the write rows (default 2; 1 with --quick)")
    parser.add_argument("--saves", type=int, help="editor-style saves (default 5,000; 500 with --quick)")
    parser.add_argument("--slow-limit", type=float, default=120.0,
                        help="a layout whose sample takes longer than this many seconds gets no more repetitions of that row")
    parser.add_argument("--binder-import", choices=("cp", "bulk"), default="cp",
                        help="cp: copy the corpus into a fresh mount, timed (default; hours for 10,000 entries); "
                             "bulk: write it straight into git in the apps' format, as a clone would be, not timed")
    parser.add_argument("--history-versions", type=int, default=1000,
                        help="saves of one record for the .binder/history row (default 1,000)")
    parser.add_argument("--views-only", action="store_true",
                        help="only the .binder/ rows, on a binder written in bulk (binder alone; minutes)")
    parser.add_argument("--one-folder", action="store_true",
                        help="every entry in one folder (visits/): the 50,000 / 100,000 records in one folder rows")
    parser.add_argument("--import-only", action="store_true", help="stop after the import row (and its checks)")
    parser.add_argument("--folder-files", type=int,
                        help="files in the folder `binder import` row (default 10,000; 1,000 with --quick)")
    parser.add_argument("--folder-reps", type=int, help="repetitions of the folder import row (default 3; 1 with --quick)")
    parser.add_argument("--folder-import-only", action="store_true",
                        help="only the folder import row: binder import of a generated folder beside gocryptfs and plain cp -r")
    parser.add_argument("--keep", action="store_true", help="keep the corpus and layouts (unmounted) under OUT")
    parser.add_argument("--server", action="store_true",
                        help="benchmark `binder serve` under attack instead (scripts/bench_server.py; its own options follow)")
    if "--server" in sys.argv[1:]:
        rest = [a for a in sys.argv[1:] if a != "--server"]
        os.execv(sys.executable, [sys.executable, os.path.join(ROOT, "scripts", "bench_server.py")] + rest)
    options = parser.parse_args()
    if options.entries is None:
        options.entries = 2000 if options.quick else 10000
    if options.attachments is None:
        options.attachments = 10 if options.quick else 40
    if options.reps is None:
        options.reps = 3 if options.quick else 5
    if options.writes is None:
        options.writes = 200 if options.quick else 1000
    if options.write_reps is None:
        options.write_reps = 1 if options.quick else 2
    if options.saves is None:
        options.saves = 500 if options.quick else 5000
    if options.cold_reps is None:
        options.cold_reps = 2 if options.quick else 3
    if options.folder_files is None:
        options.folder_files = 1000 if options.quick else 10000
    if options.folder_reps is None:
        options.folder_reps = 1 if options.quick else 3

    bench = Bench(options)

    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupted)
    try:
        bench.run()
    except (BenchError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        print(f"scripts/bench: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
