import Foundation
import Glibc

/// An fsync run on a thread of its own while the caller goes on, and waited for with `wait()`.
///
/// A save makes its pack and the pack's index durable side by side (`PackWriter.write`): the
/// pack's fsync runs here while the index is built, written and fsynced, so the two device
/// flushes overlap where, one after the other, they were two of the five a save waited for
/// (docs/BENCHMARKS.md, "Saves: the pack's fsync beside its index's"). Both are durable before
/// either is renamed into place, as before.
///
/// A thread made for the job, not a dispatch queue: the process may have been forked without
/// exec (the kill tests' writers are), where libdispatch's threads do not exist, and a thread
/// of its own never queues behind the shared pool's work (a listing index being encoded). On
/// a busy machine the thread may not have started by the time the caller waits (2-3 ms were
/// seen at a load of 4 on 2 cores): the caller then runs the fsync itself, so waiting never
/// costs more than the fsync done in line would have.
final class BackgroundFsync: Sendable {
    /// The fsync, run once by whichever of the thread and the waiter claims it first.
    private final class Job: @unchecked Sendable {
        enum State {
            case pending, running
            /// The fsync's errno, 0 when it succeeded.
            case done(Int32)
        }

        let fd: Int32
        /// Guards `state`; broadcast when it becomes `done`.
        private let condition = NSCondition()
        private var state = State.pending

        init(fd: Int32) { self.fd = fd }

        /// Runs the fsync if nobody has started it; false if it was started already.
        func runIfPending() -> Bool {
            condition.lock()
            guard case .pending = state else {
                condition.unlock()
                return false
            }
            state = .running
            condition.unlock()
            let code = fsync(fd) == 0 ? Int32(0) : errno
            condition.lock()
            state = .done(code)
            condition.broadcast()
            condition.unlock()
            return true
        }

        /// Waits until the fsync has ended; its errno, or 0.
        func outcome() -> Int32 {
            condition.lock()
            defer { condition.unlock() }
            while true {
                if case .done(let code) = state { return code }
                condition.wait()
            }
        }
    }

    private let job: Job

    /// Starts `fsync(fd)` on a detached thread. The caller keeps `fd` open until `wait()` has
    /// returned.
    init(_ fd: Int32) {
        let job = Job(fd: fd)
        self.job = job
        var thread = pthread_t()
        let context = Unmanaged.passRetained(job).toOpaque()
        if pthread_create(&thread, nil, { context in
            _ = Unmanaged<Job>.fromOpaque(context!).takeRetainedValue().runIfPending()
            return nil
        }, context) == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<Job>.fromOpaque(context).release()  // no thread: `wait()` runs it
        }
    }

    /// Waits for the fsync to end (running it here if the thread has not started it); returns
    /// its errno, or 0. Called once.
    func wait() -> Int32 {
        _ = job.runIfPending()
        return job.outcome()
    }
}
