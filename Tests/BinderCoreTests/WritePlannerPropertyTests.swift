import BinderCore
import BinderFormat
import Foundation
import PropertyBased
import Testing

/// The write rules' invariants over generated sequences of operations (writes, renames,
/// deletes, children folders, times), each applied to a fresh binder through the view, refused
/// or not: after every step `verify` finds nothing wrong, every listed file reads back with
/// the size `stat` gives, and a model of the attachments and record bodies written says
/// nothing stored was lost or invented. Shrinking reduces a failure to its shortest sequence.
@Suite struct WritePlannerPropertyTests {
    static let folders = ["visits", "labs"]
    static let stems = ["a", "b", "c"]
    static let extensions = [".md", ".txt"]

    /// One operation, decoded from a number (so that the generator and its shrinking are plain
    /// integer arrays).
    enum Operation: CustomStringConvertible {
        case write(String, String)
        case rename(String, String)
        case remove(String)
        case makeChildren(String)
        case writeChild(String, String)
        case touch(String, Int64)

        init(_ code: Int) {
            let path = { (n: Int) -> String in
                let folder = folders[n % folders.count], stem = stems[(n / 2) % stems.count]
                return "\(folder)/\(stem)\(extensions[(n / 6) % extensions.count])"
            }
            let text = "body \(code % 97)\n"
            switch code % 6 {
            case 0, 1: self = .write(path(code / 6), text)
            case 2: self = .rename(path(code / 6), path(code / 72))
            case 3: self = .remove(path(code / 6))
            case 4: self = .makeChildren(String(path(code / 6).dropLast(3)) + ".children")
            default:
                if code % 12 == 5 { self = .writeChild(String(path(code / 12).split(separator: ".")[0]) + ".children/01-note.md", text) }
                else { self = .touch(path(code / 6), 1_600_000_000 + Int64(code)) }
            }
        }

        var description: String {
            switch self {
            case .write(let p, _): return "write \(p)"
            case .rename(let a, let b): return "mv \(a) \(b)"
            case .remove(let p): return "rm \(p)"
            case .makeChildren(let p): return "mkdir \(p)"
            case .writeChild(let p, _): return "write \(p)"
            case .touch(let p, let t): return "touch \(p) @\(t)"
            }
        }
    }

    @Test func everySequenceLeavesAReadableBinderAndLosesNothing() async {
        await propertyCheck(count: 40, input: Gen.int(in: 0...100_000).array(of: 1...10)) { codes in
            try check(codes.map(Operation.init))
        }
    }

    private func check(_ operations: [Operation]) throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        for folder in Self.folders { try binder.view.makeDirectory(folder) }
        /// What the model says each top-level file holds: attachments written exactly, records
        /// (and records renamed to attachments) as their rendering ends.
        var model: [String: (text: String, exact: Bool)] = [:]
        for (step, operation) in operations.enumerated() {
            let done: Bool
            do {
                try apply(operation, to: binder)
                done = true
            } catch is WriteError {
                done = false  // a refusal changes nothing (the model stays)
            }
            if done { update(&model, operation) }
            let context = "after step \(step) (\(operations.prefix(step + 1)))"
            let problems = try BinderVerifier(repository: binder.repository, key: binder.key).verify().problems
            #expect(problems.isEmpty, "\(context): \(problems)")
            let fresh = try BinderView(repository: binder.repository, key: binder.key, logger: binder.logger)
            let files = try TestBinder.files(fresh)
            for file in files {
                let bytes = try TestBinder.read(fresh, file)
                #expect(bytes.count == (try fresh.attributes(file)).size, "\(context): \(file) size")
            }
            let topLevel = Set(files.filter { !$0.contains(".children/") })
            #expect(topLevel == Set(model.keys), "\(context): files \(topLevel.sorted()) model \(model.keys.sorted())")
            for (path, expected) in model where topLevel.contains(path) {
                let content = String(decoding: try TestBinder.read(fresh, path), as: UTF8.self)
                #expect(expected.exact ? content == expected.text : content.hasSuffix(expected.text), "\(context): \(path) holds \(content)")
            }
        }
    }

    private func apply(_ operation: Operation, to binder: TestBinder) throws {
        switch operation {
        case .write(let path, let text), .writeChild(let path, let text): try binder.write(path, Array(text.utf8))
        case .rename(let from, let to): try binder.view.rename(from, to: to)
        case .remove(let path): try binder.view.remove(path)
        case .makeChildren(let path): try binder.view.makeDirectory(path)
        case .touch(let path, let seconds): try binder.view.setModified(path, to: Timestamp(seconds: seconds))
        }
    }

    /// The model's view of a successful operation.
    private func update(_ model: inout [String: (text: String, exact: Bool)], _ operation: Operation) {
        switch operation {
        case .write(let path, let text):
            model[path] = (text, !path.hasSuffix(".md"))
        case .rename(let from, let to):
            guard from != to, let moved = model.removeValue(forKey: from) else { return }
            model[to] = (moved.text, moved.exact && !to.hasSuffix(".md"))
        case .remove(let path):
            model.removeValue(forKey: path)
        case .writeChild(let path, _):
            // A child written before its record makes the record, empty.
            let owner = String(path.prefix { $0 != "." }) + ".md"
            if model[owner] == nil { model[owner] = ("", false) }
        case .makeChildren, .touch:
            break
        }
    }
}
