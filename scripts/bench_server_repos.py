#!/usr/bin/env python3
"""What one request of `binder serve` costs with many repositories on the server (issue 43):
COUNT empty bare repositories of 500 other users are put in the folder, then one user logs in,
pushes a repository into existence, lists their repositories and asks for the receive-pack
advertisement of new ids (the quota check), 50 times each, on one kept-alive connection.
Prints one JSON line: milliseconds per listing and per advertisement, seconds per creating
push, seconds to start. Loopback only; bounded. Needs nostr-sdk (scripts/setup).

usage: scripts/bench_server_repos.py BINDER WORK_FOLDER [COUNT]   (COUNT: 5000)
Run it once with a binder built before a change and once after, on the same WORK_FOLDER.
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import time

INTEROP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Tests", "interop")


def main(binder, root, count):
    repos = os.path.join(root, "srv")
    if not os.path.exists(repos):
        os.makedirs(repos)
        template = os.path.join(root, "template.git")
        subprocess.run(["git", "init", "-q", "--bare", template], check=True)
        for i in range(count):
            folder = os.path.join(repos, "r%05d.git" % i)
            shutil.copytree(template, folder)
            with open(os.path.join(folder, "binder-owner"), "w") as f:
                f.write(("%02d" % (i % 500)) * 32 + "\n")
    nsec = os.path.join(root, "nsec")
    if not os.path.exists(nsec):
        import nostr_sdk as n
        with open(nsec, "w") as f:
            f.write(n.Keys.generate().secret_key().to_bech32())
        os.chmod(nsec, 0o600)
    work = os.path.join(root, "work")
    if not os.path.exists(work):
        subprocess.run("git init -q -b main '%s' && cd '%s' && echo x > a.json && git add a.json && "
                       "git -c user.name=t -c user.email=t@t commit -q -m init" % (work, work), shell=True, check=True)
    with open(os.path.join(root, "serve.log"), "ab") as log:
        started = time.monotonic()
        server = subprocess.Popen([binder, "serve", "--repos", repos, "--listen", "127.0.0.1:0", "--logins-per-minute", "100000"],
                                  stdout=subprocess.PIPE, stderr=log)
    try:
        line = server.stdout.readline().decode()
        startup = time.monotonic() - started
        port = int(re.search(r":(\d+)\s*$", line).group(1))
        url = "http://127.0.0.1:%d" % port
        token = subprocess.run(["python3", os.path.join(INTEROP, "mgit_client.py"), "login", url, nsec],
                               capture_output=True, text=True, check=True).stdout.strip()

        def push(repo):
            began = time.monotonic()
            subprocess.run(["git", "-c", "http.extraHeader=Authorization: Bearer " + token, "-C", work, "push", "-q",
                            url + "/api/mgit/repos/" + repo, "main"], check=True, capture_output=True)
            return time.monotonic() - began

        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

        def per_request_ms(path, times=50):
            began = time.monotonic()
            for i in range(times):
                connection.request("GET", path.replace("{i}", str(i)), headers={"Authorization": "Bearer " + token})
                response = connection.getresponse()
                response.read()
                assert response.status == 200, response.status
            return (time.monotonic() - began) / times * 1000

        tag = "%d-%d" % (os.getpid(), int(time.time()))
        first_push = push("mine-" + tag)
        listing = per_request_ms("/api/mgit/user/repositories")
        advertisement = per_request_ms("/api/mgit/repos/new-" + tag + "-{i}/info/refs?service=git-receive-pack")
        second_push = push("more-" + tag)
    finally:
        server.terminate()
        server.wait()
    print(json.dumps({"repositories": count, "start_s": round(startup, 2), "listing_ms": round(listing, 1),
                      "advertisement_ms": round(advertisement, 1), "creating_push_s": round((first_push + second_push) / 2, 2)}))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5000)
