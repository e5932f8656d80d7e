import BinderCore
import BinderGit

/// `binder import` done by the binder's one writer (a running mount, asked through its control
/// channel): planned against the binder's tip, then stored as one commit in the writer's own
/// serialisation (`serialised`: the mount's saves wait meanwhile, none is lost). When the tip
/// moved between the plan and the commit (a save, a sync), the import is planned again against
/// the new tip, so that what is already there is never added twice.
public enum WriterImport {
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The request does not decode, or names paths binder would not make.
        case malformedRequest(reason: String)
        /// A document about someone other than the binder's patient-info, without `force`.
        case differentPatient(file: String, reason: String)
        /// The binder's records cannot be read.
        case unreadable(reason: String)
        /// Storing failed: nothing was stored.
        case storage(reason: String)

        public var description: String {
            switch self {
            case .malformedRequest(let reason): return "the import request cannot be read: \(reason)"
            case .differentPatient(let file, let reason): return ImportError.differentPatient(file: file, reason: reason).description
            case .unreadable(let reason), .storage(let reason): return reason
            }
        }
    }

    /// Plans `request` and, unless it is a dry run or brings nothing new, stores it through
    /// `serialised`, which runs its body with every other writer of the binder held off, giving
    /// it the branch's tip (`BinderView.commitBeside` in a mount).
    public static func run(_ request: ImportRequest, importer: BinderImporter,
                           serialised: (_ store: (_ tip: ObjectID?) throws -> ObjectID?) throws -> ObjectID?) throws(Failure) -> ImportOutcome {
        let tip: ObjectID?
        do { tip = try importer.tip() } catch { throw .unreadable(reason: error.description) }
        var plan = try planned(request, importer: importer, at: tip)
        if request.dryRun || plan.isEmpty { return ImportOutcome(commit: nil, plan: plan) }
        let commit: ObjectID?
        do {
            commit = try serialised { current throws -> ObjectID? in
                if current != tip { plan = try planned(request, importer: importer, at: current) }
                return try importer.store(plan)
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .storage(reason: "\(error)")
        }
        return ImportOutcome(commit: commit.map { "\($0)" }, plan: plan)
    }

    /// The plan against the records of `tip`, after the patient check.
    static func planned(_ request: ImportRequest, importer: BinderImporter, at tip: ObjectID?) throws(Failure) -> ImportPlan {
        let existing: [ExistingRecord]
        do { existing = try importer.existingRecords(at: tip) } catch { throw .unreadable(reason: error.description) }
        if !request.force {
            let patient = BinderImporter.patient(in: existing)
            for document in request.sources {
                if let difference = patient.difference(from: document.patient) { throw .differentPatient(file: document.file, reason: difference) }
            }
        }
        return request.planner.plan(request.sources, existing: existing)
    }
}
