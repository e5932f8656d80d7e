#!/usr/bin/env python3
"""A git client of its own (dulwich, pure Python, from PyPI) against `binder serve`'s Smart HTTP:
it checks the server's git engine without git's or libgit2's code. The token is read from a
file, never the command line.

usage:
  dulwich_client.py clone URL TOKEN_FILE DIR   -> a new repository in DIR fetched from URL; prints main's id
  dulwich_client.py fetch URL TOKEN_FILE DIR   -> fetches into DIR (its objects sent as haves); prints main's id
  dulwich_client.py push URL TOKEN_FILE DIR    -> commits dulwich.txt on main and pushes it; prints "<ref> ok|<reason> <id>"
  dulwich_client.py delete URL TOKEN_FILE DIR  -> asks the server to delete main; prints "<ref> ok|<reason>"
"""
import sys
import time
from urllib.parse import urlsplit

import urllib3

from dulwich.client import Urllib3HttpGitClient
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo

MAIN = b"refs/heads/main"
ZERO = b"0" * 40


def client(url, token_file):
    with open(token_file) as f:
        token = f.read().strip()
    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}/"
    # Headers of the pool manager go with every request (dulwich 1.2 ignores `extra_headers`).
    pool = urllib3.PoolManager(headers={"Authorization": "Bearer " + token})
    return Urllib3HttpGitClient(base, pool_manager=pool), parts.path


def fetch(url, token_file, repo):
    git, path = client(url, token_file)
    result = git.fetch(path, repo)
    repo.refs[MAIN] = result.refs[MAIN]
    return result.refs[MAIN].decode()


def commit_file(repo, name, text):
    parent = repo.refs[MAIN]
    tree = repo[repo[parent].tree]
    blob = Blob.from_string(text.encode())
    repo.object_store.add_object(blob)
    new_tree = Tree()
    for entry in tree.items():
        new_tree.add(entry.path, entry.mode, entry.sha)
    new_tree.add(name.encode(), 0o100644, blob.id)
    repo.object_store.add_object(new_tree)
    commit = Commit()
    commit.tree = new_tree.id
    commit.parents = [parent]
    commit.author = commit.committer = b"dulwich <d@example.org>"
    commit.author_time = commit.commit_time = int(time.time())
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = b"From dulwich\n"
    repo.object_store.add_object(commit)
    return commit.id


def send(url, token_file, repo, new):
    git, path = client(url, token_file)
    result = git.send_pack(path, lambda refs: {MAIN: new}, repo.generate_pack_data)
    status = (result.ref_status or {}).get(MAIN)
    return "ok" if status is None else status


def main(argv):
    command, url, token_file, folder = argv[1:5]
    if command == "clone":
        print(fetch(url, token_file, Repo.init(folder, mkdir=True)))
    elif command == "fetch":
        print(fetch(url, token_file, Repo(folder)))
    elif command == "push":
        repo = Repo(folder)
        new = commit_file(repo, "dulwich.txt", "written by dulwich\n")
        status = send(url, token_file, repo, new)
        if status == "ok":
            repo.refs[MAIN] = new
        print(f"{MAIN.decode()} {status} {new.decode()}")
    elif command == "delete":
        try:
            status = send(url, token_file, Repo(folder), ZERO)
        except Exception as error:  # dulwich refuses by itself when the server offers no delete-refs
            status = "refused by the client: " + type(error).__name__
        print(f"{MAIN.decode()} {status}")
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
