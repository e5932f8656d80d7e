#!/usr/bin/env python3
"""save-flushes: what a save's device flushes alone cost on this disk, without FUSE or binder.

Interleaves two patterns, N times each, in a scratch folder DIR (made; on the disk to measure):
  one    gocryptfs' save: a 4 KB temp file written, fsynced, renamed over the record (the
         folder is not fsynced);
  three  binder's save (docs/DESIGN.md, "A save's durability, step by step"): the ref's lock
         file (41 bytes), a 116 KB pack and its 1 KB index fsynced side by side; the two
         renamed into place and objects/pack fsynced; the lock renamed over the ref and
         refs/heads fsynced. Packs older than 32 saves are removed, as folds keep the folder
         small.
Prints p50/p90/p99/p999 of each in ms (docs/BENCHMARKS.md, "Saves: what the folds add to the
tail, and what the flushes alone cost").

    scripts/save-flushes.py DIR [N]     (N: 2,000 by default)
"""
import os
import sys
import threading
import time


def write_synced(path, data):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_folder(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    root = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) == 3 else 2000
    one_dir = os.path.join(root, "one")
    pack_dir = os.path.join(root, "three", "objects", "pack")
    heads = os.path.join(root, "three", "refs", "heads")
    for folder in (one_dir, pack_dir, heads):
        os.makedirs(folder, exist_ok=True)
    record, pack, index = os.urandom(4096), os.urandom(116 * 1024), os.urandom(1100)

    def one(i):
        temp = os.path.join(one_dir, f".tmp{i}")
        write_synced(temp, record)
        os.rename(temp, os.path.join(one_dir, "record"))

    def three(i):
        lock = os.path.join(heads, "main.lock")
        ref_sync = threading.Thread(target=write_synced, args=(lock, b"%040d\n" % i))
        ref_sync.start()
        temp_pack, temp_index = os.path.join(pack_dir, f"tmp_pack_{i}"), os.path.join(pack_dir, f"tmp_idx_{i}")
        pack_sync = threading.Thread(target=write_synced, args=(temp_pack, pack))
        pack_sync.start()
        write_synced(temp_index, index)
        pack_sync.join()
        os.rename(temp_pack, os.path.join(pack_dir, f"pack-{i}.pack"))
        os.rename(temp_index, os.path.join(pack_dir, f"pack-{i}.idx"))
        fsync_folder(pack_dir)
        ref_sync.join()
        os.rename(lock, os.path.join(heads, "main"))
        fsync_folder(heads)
        if i >= 32:
            for ext in ("pack", "idx"):
                os.unlink(os.path.join(pack_dir, f"pack-{i - 32}.{ext}"))

    samples = {"one": [], "three": []}
    for i in range(count):
        order = (("one", one), ("three", three)) if i % 2 else (("three", three), ("one", one))
        for name, save in order:
            start = time.perf_counter()
            save(i)
            samples[name].append((time.perf_counter() - start) * 1000)
    for name, values in samples.items():
        values.sort()
        at = lambda q: values[min(len(values) - 1, int(q * len(values)))]
        print(f"{name}: {len(values)} saves, p50 {at(.5):.2f} ms, p90 {at(.9):.2f}, p99 {at(.99):.2f}, p999 {at(.999):.2f}")


if __name__ == "__main__":
    main()
