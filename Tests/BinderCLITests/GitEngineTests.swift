import BinderCrypto
import Foundation
import XCTest

/// binder serve's own git engine (`--git-engine binder`, issue 42) against three clients that
/// share no code with it or each other: stock git, dulwich (Tests/interop/dulwich_client.py)
/// and binder itself (libgit2). One server per test.
final class GitEngineTests: XCTestCase {
    var root: BinderSandbox!
    var server: TestServer!
    var tokenFile: String!
    var header: String!

    override func setUpWithError() throws {
        root = try BinderSandbox()
        // Pushes of 16 MB at most: no object may inflate past that either.
        server = try TestServer(root: root.root, options: ["--git-engine", "binder", "--max-push-bytes", "16000000"])
        let key = try SecretKey.generate()
        let nsec = try root.file("alice.nsec", String(decoding: try key.nsec().copyBytes(), as: UTF8.self))
        let login = try MgitClient.run(["login", server.url, nsec])
        XCTAssertEqual(login.status, 0, login.stderr)
        let token = login.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        tokenFile = try root.file("alice.token", token)
        header = "Authorization: Bearer \(token)"
    }

    override func tearDown() {
        server?.stop()
        server = nil; root = nil
    }

    func url(_ id: String) -> String { "\(server.url)/api/mgit/repos/\(id)" }

    /// `git ARGS` with the token, in `directory`.
    func git(_ arguments: String, in directory: String? = nil, environment: [String: String] = [:]) throws -> BinderRun {
        try shell("git -c http.extraHeader='\(header!)' -c user.name=t -c user.email=t@t \(arguments)", in: directory,
                  environment: environment)
    }

    func dulwich(_ arguments: [String]) throws -> String {
        let script = URL(fileURLWithPath: MgitClient.script).deletingLastPathComponent().appendingPathComponent("dulwich_client.py").path
        let run = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", script] + arguments)
        XCTAssertEqual(run.status, 0, run.stderr)
        return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A work tree with a first commit of a 64 KB text (later commits change a line of it, so
    /// git pushes them as thin packs, deltas against what the server has).
    func workTree(_ name: String) throws -> String {
        let work = root.root.appendingPathComponent(name).path
        let made = try shell("git init -q -b main '\(work)' && cd '\(work)' && seq 1 12000 > record.txt && git add -A && git -c user.name=t -c user.email=t@t commit -q -m 'Initialize binder'")
        XCTAssertEqual(made.status, 0, made.stderr)
        return work
    }

    func serverTip(_ id: String) throws -> String { try server.git(id, "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines) }

    func testStockGitAndDulwichCloneFetchAndPushThroughTheEngine() throws {
        let work = try workTree("work")
        XCTAssertEqual(try git("push -q '\(url("engine"))' main", in: work).status, 0, "push-to-create")
        // The engine answers (git would say agent=git/…), as protocol v0 even when v2 is asked.
        let listed = try git("-c protocol.version=2 ls-remote '\(url("engine"))'", environment: ["GIT_TRACE_PACKET": "1"])
        XCTAssertTrue(listed.stderr.contains("agent=binder/"), listed.stderr)
        XCTAssertTrue(listed.stdout.contains("\tHEAD\n") && listed.stdout.contains("\trefs/heads/main\n"), listed.stdout)

        let clone = root.root.appendingPathComponent("clone").path
        XCTAssertEqual(try git("clone -q '\(url("engine"))' '\(clone)'").status, 0)
        XCTAssertEqual(try shell("git -C '\(clone)' fsck --strict").status, 0)

        // Two commits changing one line each: a thin pack, completed by the server's indexer.
        for line in ["7", "8"] {
            XCTAssertEqual(try shell("sed -i 's/^\(line)00$/changed/' record.txt && git -c user.name=t -c user.email=t@t commit -qam 'Line \(line)'",
                                     in: work).status, 0)
        }
        let thin = try git("push '\(url("engine"))' main", in: work, environment: ["GIT_TRACE_PACKET": "1"])
        XCTAssertEqual(thin.status, 0, thin.stderr)
        XCTAssertFalse(thin.stderr.contains("no-thin"), "the engine takes thin packs")
        XCTAssertEqual(try serverTip("engine"), try shell("git -C '\(work)' rev-parse main").stdout.trimmingCharacters(in: .newlines))

        // A fetch that has the first commit: negotiated with haves, only the new objects sent.
        let fetched = try git("fetch origin", in: clone, environment: ["GIT_TRACE_PACKET": "1"])
        XCTAssertEqual(fetched.status, 0, fetched.stderr)
        XCTAssertTrue(fetched.stderr.contains("> have "), "the client sent haves")
        XCTAssertTrue(fetched.stderr.contains("< ACK "), "and the engine acknowledged one")
        XCTAssertEqual(try shell("git -C '\(clone)' rev-parse origin/main").stdout.trimmingCharacters(in: .newlines), try serverTip("engine"))

        // dulwich: clone, push, a deletion refused by the server itself, a fetch with haves.
        let dulwichRepo = root.root.appendingPathComponent("dulwich").path
        XCTAssertEqual(try dulwich(["clone", url("engine"), tokenFile, dulwichRepo]), try serverTip("engine"))
        let pushed = try dulwich(["push", url("engine"), tokenFile, dulwichRepo])
        XCTAssertTrue(pushed.hasPrefix("refs/heads/main ok "), pushed)
        XCTAssertEqual(try serverTip("engine"), String(pushed.split(separator: " ").last ?? ""))
        XCTAssertEqual(try dulwich(["delete", url("engine"), tokenFile, dulwichRepo]), "refs/heads/main deletion prohibited")
        XCTAssertEqual(try git("pull -q --no-rebase origin main", in: clone).status, 0)
        XCTAssertEqual(try shell("echo more >> record.txt && git -c user.name=t -c user.email=t@t commit -qam more", in: clone).status, 0)
        XCTAssertEqual(try git("push -q origin main", in: clone).status, 0)
        XCTAssertEqual(try dulwich(["fetch", url("engine"), tokenFile, dulwichRepo]), try serverTip("engine"))

        let fsck = try shell("git -C '\(server.repos)/engine.git' fsck --strict")
        XCTAssertEqual(fsck.status, 0, fsck.stderr)
        XCTAssertEqual(try shell("git -C '\(server.repos)/engine.git' rev-list --count main").stdout, "5\n")
    }

    /// binder's own client (libgit2 over its HTTP transport): push-to-create, a clone, and a
    /// second commit synced from one device to the other (a fetch negotiated with haves).
    func testBinderSyncCreatesClonesAndSyncsThroughTheEngine() throws {
        let nsec = String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self)
        let laptop = try Device(nsec: nsec), phone = try Device(nsec: nsec)
        try laptop.binder(["login", "--server", server.url])
        try laptop.binder(["create", "health", "--patient-name", "Alex Doe"])
        let created = try laptop.binder(["sync", "health", "--repo-id", "health"])
        XCTAssertTrue(created.stdout.contains("created health on \(server.url)"), created.stdout)
        try phone.binder(["login", "--server", server.url])
        XCTAssertTrue(try phone.binder(["clone", "health"]).stdout.contains("Cloned health"))
        XCTAssertEqual(try phone.tip("health"), try serverTip("health"))

        try laptop.binder(["new", "visits", "--title", "-", "--binder", "health", "--passphrase-file", laptop.passphraseFile],
                          stdin: "Knee\n")
        let pushed = try laptop.binder(["sync", "health"]).stdout
        XCTAssertTrue(pushed.contains("pushed"), pushed)
        let received = try phone.binder(["sync", "health"]).stdout
        XCTAssertTrue(received.contains("received"), received)
        XCTAssertEqual(try phone.tip("health"), try laptop.tip("health"))
        XCTAssertEqual(try phone.tip("health"), try serverTip("health"))
        XCTAssertEqual(try shell("git -C '\(server.repos)/health.git' fsck --strict").status, 0)
    }

    /// A clone of a repository that is one stored pack gets that pack byte for byte (no pack
    /// built: the stored one has deltas, the clients read them); of a repository of two packs,
    /// a pack libgit2 built. Every clone, by git, dulwich and binder's libgit2, holds every
    /// object and is `fsck --strict` clean.
    func testACloneOfOnePackIsTheStoredPackAndOfTwoPacksABuiltOne() throws {
        let work = try workTree("work")
        // Three commits changing a line each before the first push: its pack has deltas.
        for line in ["7", "8"] {
            XCTAssertEqual(try shell("sed -i 's/^\(line)00$/changed/' record.txt && git -c user.name=t -c user.email=t@t commit -qam 'Line \(line)'",
                                     in: work).status, 0)
        }
        XCTAssertEqual(try git("push -q '\(url("packs"))' main", in: work).status, 0)
        let packFolder = "\(server.repos)/packs.git/objects/pack"
        let objectCount = { (repository: String) in
            try shell("git -C '\(repository)' rev-list --objects --all | wc -l").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let serverObjects = try objectCount("\(server.repos)/packs.git")
        XCTAssertEqual(serverObjects, "9")
        let stored = try shell("ls '\(packFolder)'/*.pack").stdout.trimmingCharacters(in: .newlines)
        XCTAssertFalse(stored.contains("\n"), "one pack: \(stored)")
        XCTAssertTrue(try shell("git verify-pack -v '\(stored)' | grep -c ' 1 [0-9a-f]\\{40\\}$'").stdout != "0\n", "deltas in it")

        let clone = root.root.appendingPathComponent("clone").path
        // The received pack kept as it came (git unpacks fewer than 100 objects by default).
        XCTAssertEqual(try git("-c transfer.unpackLimit=1 clone -q '\(url("packs"))' '\(clone)'").status, 0)
        let received = try shell("ls '\(clone)'/.git/objects/pack/*.pack").stdout.trimmingCharacters(in: .newlines)
        XCTAssertEqual(try shell("cmp '\(stored)' '\(received)'").status, 0, "the stored pack as it is: \(received)")
        let dulwichRepo = root.root.appendingPathComponent("dulwich").path
        XCTAssertEqual(try dulwich(["clone", url("packs"), tokenFile, dulwichRepo]), try serverTip("packs"))
        for repository in [clone, dulwichRepo] {
            let fsck = try shell("git -C '\(repository)' fsck --strict")
            XCTAssertEqual(fsck.status, 0, fsck.stderr)
            XCTAssertEqual(try objectCount(repository), serverObjects)
        }

        // A second push: two packs, so the clone's pack is built, and as complete.
        XCTAssertEqual(try shell("echo more >> record.txt && git -c user.name=t -c user.email=t@t commit -qam more", in: work).status, 0)
        XCTAssertEqual(try git("push -q '\(url("packs"))' main", in: work).status, 0)
        XCTAssertEqual(try shell("ls '\(packFolder)'/*.pack | wc -l").stdout, "2\n")
        let second = root.root.appendingPathComponent("second").path
        XCTAssertEqual(try git("-c transfer.unpackLimit=1 clone -q '\(url("packs"))' '\(second)'").status, 0)
        let rebuilt = try shell("ls '\(second)'/.git/objects/pack/*.pack").stdout.trimmingCharacters(in: .newlines)
        XCTAssertEqual(try shell("cmp -s '\(stored)' '\(rebuilt)'").status, 1, "a pack built: \(rebuilt)")
        let fsck = try shell("git -C '\(second)' fsck --strict")
        XCTAssertEqual(fsck.status, 0, fsck.stderr)
        XCTAssertEqual(try objectCount(second), try objectCount("\(server.repos)/packs.git"))
    }

    func testRefusalsAreGitsAndLeaveTheRepositoryAsItWas() throws {
        let work = try workTree("work")
        XCTAssertEqual(try git("push -q '\(url("guarded"))' main", in: work).status, 0)
        let tip = try serverTip("guarded")

        // A rewritten history, even forced, is refused as non-fast-forward.
        XCTAssertEqual(try shell("git -c user.name=t -c user.email=t@t commit -q --amend -m Rewritten", in: work).status, 0)
        let forced = try git("push --force '\(url("guarded"))' main", in: work)
        XCTAssertNotEqual(forced.status, 0)
        XCTAssertTrue(forced.stderr.contains("non-fast-forward"), forced.stderr)
        // A deletion: the engine does not offer delete-refs, so git refuses before sending.
        XCTAssertNotEqual(try git("push '\(url("guarded"))' :main", in: work).status, 0)
        XCTAssertEqual(try serverTip("guarded"), tip)

        // Trees git's fsck refuses (receive.fsckObjects): each push refused, nothing kept. (An
        // empty name git itself will not send; TreeEntryRulesTests has it.)
        let blob = try shell("git hash-object -w record.txt", in: work).stdout.trimmingCharacters(in: .newlines)
        let emptyTree = try shell("git mktree < /dev/null", in: work).stdout.trimmingCharacters(in: .newlines)
        let cases: [(entry: String, object: String, problem: String)] = [
            ("100644 .GIT", blob, "hasDotgit"), ("100644 git~1", blob, "hasDotgit"), ("100644 ..", blob, "hasDotdot"),
            ("100644 a/b", blob, "fullPathname"), ("100000 odd", blob, "badFilemode"), ("040000 zero", emptyTree, "zeroPaddedFilemode"),
        ]
        for (entry, object, problem) in cases {
            let crafted = try shell("python3 -c \"import sys; sys.stdout.buffer.write(b'\(entry)\\0' + bytes.fromhex('\(object)'))\" | git hash-object -t tree -w --literally --stdin", in: work)
            let tree = crafted.stdout.trimmingCharacters(in: .newlines)
            XCTAssertEqual(crafted.status, 0, crafted.stderr)
            let commit = try shell("git -c user.name=t -c user.email=t@t commit-tree \(tree) -p \(tip) -m Bad", in: work).stdout.trimmingCharacters(in: .newlines)
            let pushed = try git("push '\(url("guarded"))' \(commit):refs/heads/main", in: work)
            XCTAssertNotEqual(pushed.status, 0, entry)
            XCTAssertTrue(pushed.stderr.contains(problem) && pushed.stderr.contains("unpacker error"), "\(entry): \(pushed.stderr)")
        }
        // A blob of 64 MB of zeros is a pack of 64 KB: refused before libgit2 holds it whole.
        XCTAssertEqual(try shell("head -c 64000000 /dev/zero > zeros.bin && git add zeros.bin && git -c user.name=t -c user.email=t@t commit -qm Zeros",
                                 in: work).status, 0)
        let bomb = try git("push '\(url("guarded"))' HEAD:refs/heads/zeros", in: work)
        XCTAssertNotEqual(bomb.status, 0)
        XCTAssertTrue(bomb.stderr.contains("an object of 64000000 bytes, past the limit of 16000000"), bomb.stderr)
        XCTAssertEqual(try serverTip("guarded"), tip)
        XCTAssertEqual(try shell("ls '\(server.repos)/guarded.git/objects/pack' | wc -l").stdout.trimmingCharacters(in: .whitespacesAndNewlines), "2",
                       "only the first push's pack and index")
        XCTAssertEqual(try shell("ls '\(server.repos)/.binder-serve/staging' | wc -l").stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0",
                       "no quarantine folder left")

        // A shallow fetch asked by hand (git itself does not ask: no shallow capability) gets an ERR line.
        let packet = { (line: String) in String(format: "%04x", line.utf8.count + 4) + line }
        let body = try root.file("shallow.body", packet("want \(tip) side-band-64k\n") + packet("deepen 1\n") + "0000" + packet("done\n"))
        let headerFile = try root.file("header", header)
        let shallow = try shell("curl -s -H @'\(headerFile)' --data-binary @'\(body)' '\(url("guarded"))/git-upload-pack'")
        XCTAssertTrue(shallow.stdout.contains("ERR shallow"), shallow.stdout)
    }
}
