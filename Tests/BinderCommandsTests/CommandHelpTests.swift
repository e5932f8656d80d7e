import ArgumentParser
@testable import BinderCommands
import XCTest

/// `CommandHelp.examples` is kept by command path beside the ArgumentParser tree: a command
/// renamed or an option dropped there must fail here, not leave help and the man page showing
/// a command line that no longer runs.
final class CommandHelpTests: XCTestCase {
    /// Every key names a command of the tree, word for word.
    func testEveryExampleKeyNamesACommand() {
        XCTAssertGreaterThan(CommandHelp.examples.count, 15)
        for key in CommandHelp.examples.keys {
            let words = key.split(separator: " ").map(String.init)
            let resolved = CommandTree.resolve(words)
            XCTAssertNil(resolved.unknown, "examples[\"\(key)\"]: no command '\(resolved.unknown ?? "")'")
            XCTAssertEqual(resolved.path, words, "examples[\"\(key)\"] names no command")
        }
    }

    /// Every `binder …` in an example parses with the command definitions (options, arguments
    /// and each command's validation), and so does the `mount -t fuse.binder` one, through the
    /// mount helper's translation.
    func testEveryExampleCommandLineParses() throws {
        var parsed = 0
        for (key, examples) in CommandHelp.examples {
            for example in examples {
                for words in Self.binderInvocations(example.command) {
                    do {
                        _ = try BinderCommand.parseAsRoot(words)
                        parsed += 1
                    } catch {
                        XCTFail("examples[\"\(key)\"] '\(example.command)': \(BinderCommand.message(for: error))")
                    }
                }
            }
        }
        XCTAssertGreaterThan(parsed, 50)
    }

    /// The tokenizer the test reads examples with, on the shapes they take.
    func testInvocationsAreFoundInShellLines() {
        let table: [(line: String, invocations: [[String]])] = [
            ("binder mount health ~/Health", [["mount", "health", "~/Health"]]),
            ("binder key import < key.txt", [["key", "import"]]),
            ("binder verify health --json | jq .problems", [["verify", "health", "--json"]]),
            ("echo 'Dr. Lee' | binder share a --label -", [["share", "a", "--label", "-"]]),
            ("printf '%s\\n' \"$NAME\" | binder create health --dob -", [["create", "health", "--dob", "-"]]),
            ("binder clone 3f2a…", [["clone", Self.repositoryID]]),
            ("mount -t fuse.binder health /mnt/h -o ro", [["mount", "health", "/mnt/h", "-o", "ro"]]),
        ]
        for (line, invocations) in table {
            XCTAssertEqual(Self.binderInvocations(line), invocations, line)
        }
    }

    /// A repository id where an example elides one ("3f2a…").
    static let repositoryID = "3f2a9c0e-5b1d-4e7a-9f60-2c8d1b4a7e35"

    /// The arguments of each `binder` run in a shell line: words split as sh does for the
    /// quoting examples use, pipes and `;` separating commands, redirections dropped.
    static func binderInvocations(_ line: String) -> [[String]] {
        var commands: [[String]] = [[]]
        var word: String?
        var quote: Character?
        var skipNext = false
        func endWord() {
            if let finished = word {
                if skipNext { skipNext = false } else { commands[commands.count - 1].append(finished) }
            }
            word = nil
        }
        var characters = line.makeIterator()
        while let character = characters.next() {
            if let open = quote {
                if character == open { quote = nil } else { word = (word ?? "") + String(character) }
                continue
            }
            switch character {
            case "'", "\"": quote = character; word = word ?? ""
            case "\\": word = (word ?? "") + String(characters.next().map { String($0) } ?? "")
            case " ": endWord()
            case "|", ";": endWord(); commands.append([])
            case "<", ">": endWord(); skipNext = true
            default: word = (word ?? "") + String(character)
            }
        }
        endWord()
        return commands.compactMap { command -> [String]? in
            let words = command.map { $0 == "3f2a…" ? repositoryID : $0 }
            if words.first == "binder" { return Array(words.dropFirst()) }
            // mount(8) runs the helper as `mount.fuse.binder SOURCE TARGET -o OPTIONS`.
            if words.first == "mount", let type = words.firstIndex(of: "-t"), type + 1 < words.count,
               words[type + 1] == "fuse.binder" {
                var helper = words
                helper.removeSubrange(type...(type + 1))
                return try? MountHelper.translate(Array(helper.dropFirst())).arguments
            }
            return nil
        }
    }
}
