#!/usr/bin/env python3
"""Commits a tree that stock git would refuse to make, for the hostile-repository tests.

usage: craft_tree.py REPO OPS.json

Starts from the tree of `refs/heads/main` and applies the operations in OPS.json (a list),
then writes a commit on top of `main` and moves `main` to it. The index and the work tree
are left alone. Tree objects are written with `git hash-object --literally`, which skips
git's own checks, so names like `..`, `.git`, names that are not UTF-8, duplicate names,
symlinks and gitlinks all go in as given.

Operations:
  {"add": FOLDER, "name_hex": HEX, "mode": "100644"|"40000"|"120000"|"160000", ...object}
      adds an entry (next to any entry of the same name: duplicates are kept) in the git
      folder FOLDER ("" is the root; made if missing); the object is one of
      "blob_b64": base64 bytes, "tree_of": a git folder of the current tree (its tree id),
      "blob_at": a git path of the current tree (its blob id), "oid": 40 hex digits.
  {"remove": PATH}   removes every entry at PATH.
Prints the new commit id.
"""
import base64
import json
import subprocess
import sys


def git(repo, *args, data=None):
    run = subprocess.run(["git", "-C", repo, *args], input=data, capture_output=True)
    if run.returncode != 0:
        sys.exit("git %s: %s" % (" ".join(args), run.stderr.decode(errors="replace")))
    return run.stdout


def read_tree(repo, oid):
    raw = git(repo, "cat-file", "tree", oid)
    entries, i = [], 0
    while i < len(raw):
        space = raw.index(b" ", i)
        nul = raw.index(b"\0", space)
        entries.append([raw[i:space], raw[space + 1:nul], raw[nul + 1:nul + 21].hex()])
        i = nul + 21
    return entries


def write_tree(repo, entries):
    # git's order: bytewise by name, folders compared as if they ended in '/'.
    def key(entry):
        return entry[1] + (b"/" if entry[0] == b"40000" else b"")
    body = b"".join(m + b" " + n + b"\0" + bytes.fromhex(o) for m, n, o in sorted(entries, key=key))
    return git(repo, "hash-object", "-t", "tree", "--literally", "-w", "--stdin", data=body).decode().strip()


def split(path):
    return [part.encode() for part in path.split("/")] if path else []


def find(repo, tree, parts):
    """The entry at `parts` below `tree` (mode, oid), or None."""
    mode, oid = b"40000", tree
    for part in parts:
        if mode != b"40000":
            return None
        match = [e for e in read_tree(repo, oid) if e[1] == part]
        if not match:
            return None
        mode, oid = match[0][0], match[0][2]
    return mode, oid


def update(repo, tree, parts, change):
    """The id of `tree` (None: empty) with `change(entries)` applied to the folder at `parts`."""
    entries = read_tree(repo, tree) if tree else []
    if not parts:
        change(entries)
        return write_tree(repo, entries)
    head, rest = parts[0], parts[1:]
    match = [e for e in entries if e[1] == head and e[0] == b"40000"]
    sub = update(repo, match[0][2] if match else None, rest, change)
    if match:
        match[0][2] = sub
    else:
        entries.append([b"40000", head, sub])
    return write_tree(repo, entries)


def main():
    repo, ops_file = sys.argv[1], sys.argv[2]
    with open(ops_file) as f:
        ops = json.load(f)
    parent = git(repo, "rev-parse", "refs/heads/main").decode().strip()
    base = git(repo, "rev-parse", parent + "^{tree}").decode().strip()
    tree = base
    for op in ops:
        if "add" in op:
            if "blob_b64" in op:
                oid = git(repo, "hash-object", "-w", "--stdin", data=base64.b64decode(op["blob_b64"])).decode().strip()
            elif "tree_of" in op:
                oid = find(repo, base, split(op["tree_of"]))[1]
            elif "blob_at" in op:
                oid = find(repo, base, split(op["blob_at"]))[1]
            else:
                oid = op["oid"]
            entry = [op["mode"].encode(), bytes.fromhex(op["name_hex"]), oid]
            tree = update(repo, tree, split(op["add"]), lambda entries: entries.append(entry))
        else:
            *folder, name = split(op["remove"])
            tree = update(repo, tree, folder, lambda entries: entries.__setitem__(
                slice(None), [e for e in entries if e[1] != name]))
    env_args = ["-c", "user.name=t", "-c", "user.email=t@t"]
    commit = git(repo, *env_args, "commit-tree", tree, "-p", parent, "-m", "Crafted tree").decode().strip()
    git(repo, "update-ref", "refs/heads/main", commit)
    print(commit)


if __name__ == "__main__":
    main()
