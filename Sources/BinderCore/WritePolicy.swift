import BinderFormat
import Foundation

/// Which changes a view takes. `everything` is the patient's own binder; `onlyNewRecords` is a
/// share opened by a doctor (`binder open-share`): what the share held when the view was made
/// is read-only (EROFS), and the doctor may add new `.md` records (in any folder, or as
/// children of a record in its `X.children/` folder) and change or remove those until the
/// view goes. Every commit gets the message the mode gives (no names, no content).
public struct WriteMode: Sendable {
    let onlyNew: Bool
    let commitMessage: (@Sendable () -> String)?

    public static let everything = WriteMode(onlyNew: false, commitMessage: nil)

    /// A doctor's share: new `.md` records only, each commit named by `commitMessage`.
    public static func onlyNewRecords(commitMessage: @escaping @Sendable () -> String) -> WriteMode {
        WriteMode(onlyNew: true, commitMessage: commitMessage)
    }
}

/// The rules of a `WriteMode`, for one view: the view paths held when it was made. The planner
/// asks before each change (`WritePlanner`), the view before opening a file for writing, so a
/// refusal comes at the system call that asked and nothing is stored.
struct WritePolicy: Sendable {
    /// View paths the view showed when it was made (nil: every change is allowed).
    let held: Set<String>?
    let commitMessage: (@Sendable () -> String)?

    static let everything = WritePolicy(held: nil, commitMessage: nil)

    /// `mode` for the view whose listings are `listings` now (each folder is listed once).
    init(_ mode: WriteMode, listings: ListingCache) throws(ViewError) {
        guard mode.onlyNew else {
            self = .everything
            return
        }
        var held = Set<String>()
        var folders = [""]
        while let folder = folders.popLast() {
            let listing = try listings.listing(folder)
            for (name, node) in listing.nodes {
                let path = folder.isEmpty ? name : folder + "/" + name
                held.insert(path)
                if node.isDirectory { folders.append(path) }
            }
        }
        self.init(held: held, commitMessage: mode.commitMessage)
    }

    init(held: Set<String>?, commitMessage: (@Sendable () -> String)?) {
        self.held = held
        self.commitMessage = commitMessage
    }

    /// A change to what is at `path` now (write, truncate, times, rename, removal).
    func checkChange(_ path: String) throws(WriteError) {
        if let held, held.contains(path) { throw .shared(path) }
    }

    /// A new file at `path`: under `onlyNewRecords`, a `.md` record not held.
    func checkNew(_ path: String) throws(WriteError) {
        guard let held else { return }
        if held.contains(path) { throw .shared(path) }
        guard BinderNaming.isRecordName(path) else {
            throw .notPermitted(path: path, reason: "a shared binder takes new .md notes only")
        }
    }

    /// `mkdir`: under `onlyNewRecords`, only `X.children` (room for a note on record X).
    func checkFolder(_ path: String) throws(WriteError) {
        guard let held else { return }
        if held.contains(path) { throw .shared(path) }
        guard BinderNaming.isChildrenFolder(path) else {
            throw .notPermitted(path: path, reason: "a shared binder takes new .md notes only (no new folders)")
        }
    }

    /// The plan with the mode's commit message.
    func named(_ plan: WritePlan) -> WritePlan {
        guard let commitMessage, !plan.changes.isEmpty else { return plan }
        var plan = plan
        plan.message = commitMessage()
        return plan
    }
}
