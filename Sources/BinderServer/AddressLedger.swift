import Synchronization

/// The slots each client address holds (a direct client's connections, a proxied client's
/// requests in progress: see `ConnectionGuard`), and who waits for one, shared by all
/// connections. A slot given back goes to the address's first waiter, never to a newcomer,
/// so the queue is served in order.
final class AddressLedger: Sendable {
    /// A place in an address's queue (`acquire`'s `.queued`).
    struct Ticket: Sendable, Equatable {
        let address: String
        let number: UInt64
    }

    enum Acquisition: Sendable, Equatable {
        /// The slot is the caller's: `release` it once.
        case granted
        /// Waiting: `onGrant` will be called (on another thread) when a slot is the caller's,
        /// unless `cancel` removed the ticket first.
        case queued(Ticket)
        /// Past the cap and the queue.
        case refused
    }

    private struct Waiter {
        let number: UInt64
        let onGrant: @Sendable () -> Void
    }

    private struct Address {
        var held = 0
        var waiting: [Waiter] = []
    }

    private struct State {
        var addresses: [String: Address] = [:]
        var nextTicket: UInt64 = 0
    }

    /// Guards every address's slots and queue.
    private let state = Mutex(State())

    /// A slot for `address` if it holds fewer than `limit`; else a place in its queue if fewer
    /// than `queue` wait; else refused.
    func acquire(_ address: String, limit: Int, queue: Int, onGrant: @escaping @Sendable () -> Void) -> Acquisition {
        state.withLock { state in
            var entry = state.addresses[address, default: Address()]
            defer { state.addresses[address] = entry }
            if entry.held < limit && entry.waiting.isEmpty {
                entry.held += 1
                return .granted
            }
            guard entry.waiting.count < queue else { return .refused }
            state.nextTicket += 1
            entry.waiting.append(Waiter(number: state.nextTicket, onGrant: onGrant))
            return .queued(Ticket(address: address, number: state.nextTicket))
        }
    }

    /// Gives back a slot of `address`: to its first waiter if there is one.
    func release(_ address: String) {
        let granted: Waiter? = state.withLock { state in
            guard var entry = state.addresses[address] else { return nil }
            if entry.waiting.isEmpty {
                entry.held -= 1
                state.addresses[address] = entry.held > 0 ? entry : nil
                return nil
            }
            let first = entry.waiting.removeFirst()
            state.addresses[address] = entry
            return first
        }
        granted?.onGrant()
    }

    /// Leaves the queue: true if the ticket was still waiting; false if a slot was granted
    /// to it meanwhile (its `onGrant` is called or on its way: the slot is the caller's).
    func cancel(_ ticket: Ticket) -> Bool {
        state.withLock { state in
            guard var entry = state.addresses[ticket.address],
                  let index = entry.waiting.firstIndex(where: { $0.number == ticket.number }) else { return false }
            entry.waiting.remove(at: index)
            state.addresses[ticket.address] = entry.held > 0 || !entry.waiting.isEmpty ? entry : nil
            return true
        }
    }

    /// Slots held by `address` now (tests).
    func held(_ address: String) -> Int {
        state.withLock { $0.addresses[address]?.held ?? 0 }
    }
}
