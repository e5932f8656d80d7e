import Glibc

/// Git's delta format (a pack's OFS_DELTA and REF_DELTA entries), made for trees from what two
/// trees share, not searched for.
///
/// Two versions of a folder's tree differ in the entries that changed and share every other
/// entry byte for byte, in the same order (git sorts a tree's entries). So a delta is found by
/// walking both trees' entries side by side, as a merge does: entries the two hold alike are
/// copied from the base, the rest inserted. That is one pass over each tree, where libgit2's
/// pack builder indexes the base and scans the target for matches, against each of ten
/// candidates (for a folder of 100,000 records, 7 MB trees: most of a fold's time,
/// docs/BENCHMARKS.md).
///
/// A delta: the base's size and the target's (little-endian base-128), then instructions:
/// copy (bit 7 set; bits 0-3 say which bytes of the base offset follow, bits 4-6 which bytes
/// of the size; a size of 0 means 0x10000), or insert (1-127: that many literal bytes).
enum TreeDelta {
    /// The largest copy one instruction makes here: git's own encoder stops at 0x10000, and so
    /// does this one, so that any reader takes the deltas.
    static let maxCopy = 0x10000
    /// The most literal bytes one insert instruction carries.
    static let maxInsert = 127

    /// A delta that rebuilds `target` from `base`, both trees; nil when either is not a
    /// well-formed tree. The delta is correct for any two byte strings that parse as entries
    /// (only bytes compared equal are copied); how small it is depends on the order: for two
    /// versions of one folder it holds little more than the entries that changed.
    static func encode(from base: UnsafeRawBufferPointer, to target: UnsafeRawBufferPointer) -> [UInt8]? {
        // A copy's offset has four bytes.
        guard base.count <= Int(UInt32.max), base.baseAddress != nil, target.baseAddress != nil else { return nil }
        var encoder = Encoder(base: base, target: target)
        var i = 0, j = 0
        while i < base.count, j < target.count {
            guard let b = RawTree.entry(in: base, at: i), let t = RawTree.entry(in: target, at: j) else { return nil }
            let order = RawTree.compare(base, b, target, t)
            if order == 0 {
                if b.end - i == t.end - j, memcmp(base.baseAddress! + i, target.baseAddress! + j, b.end - i) == 0 {
                    encoder.copy(baseOffset: i, count: b.end - i)
                } else {
                    encoder.insert(upTo: t.end)
                }
                i = b.end
                j = t.end
            } else if order < 0 {
                i = b.end  // not in the target
            } else {
                encoder.insert(upTo: t.end)
                j = t.end
            }
        }
        // What the base lacks; the target checked as a tree to its end.
        while j < target.count {
            guard let t = RawTree.entry(in: target, at: j) else { return nil }
            encoder.insert(upTo: t.end)
            j = t.end
        }
        while i < base.count {
            guard let b = RawTree.entry(in: base, at: i) else { return nil }
            i = b.end
        }
        return encoder.finish()
    }

    /// `base` with `delta` applied; nil when the delta is malformed or not for a base of this
    /// size (every instruction is checked against both sizes before a byte is copied).
    static func apply(_ delta: [UInt8], to base: UnsafeRawBufferPointer) -> [UInt8]? {
        var position = 0
        guard let baseSize = varint(delta, &position), baseSize == base.count,
              let targetSize = varint(delta, &position), targetSize <= Int(Int32.max) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(targetSize)
        while position < delta.count {
            let command = delta[position]
            position += 1
            if command & 0x80 != 0 {
                guard let (offset, size) = copyOperands(command, delta, &position),
                      offset + size <= base.count, out.count + size <= targetSize else { return nil }
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: base[offset..<offset + size]))
            } else if command != 0 {
                let count = Int(command)
                guard position + count <= delta.count, out.count + count <= targetSize else { return nil }
                out.append(contentsOf: delta[position..<position + count])
                position += count
            } else {
                return nil  // reserved
            }
        }
        return out.count == targetSize ? out : nil
    }

    /// Whether `delta` applied to `base` gives exactly `target`: `apply`'s checks, comparing
    /// in place instead of building the result (a fold checks each delta it writes this way).
    static func rebuilds(_ delta: [UInt8], from base: UnsafeRawBufferPointer, exactly target: UnsafeRawBufferPointer) -> Bool {
        var position = 0
        guard let baseSize = varint(delta, &position), baseSize == base.count,
              let targetSize = varint(delta, &position), targetSize == target.count else { return false }
        var made = 0
        while position < delta.count {
            let command = delta[position]
            position += 1
            if command & 0x80 != 0 {
                guard let (offset, size) = copyOperands(command, delta, &position),
                      offset + size <= base.count, made + size <= target.count,
                      memcmp(base.baseAddress! + offset, target.baseAddress! + made, size) == 0 else { return false }
                made += size
            } else if command != 0 {
                let count = Int(command)
                guard position + count <= delta.count, made + count <= target.count,
                      delta[position..<position + count].elementsEqual(target[made..<made + count]) else { return false }
                position += count
                made += count
            } else {
                return false  // reserved
            }
        }
        return made == target.count
    }

    /// A copy instruction's base offset and size (the bytes `command` says follow, at
    /// `position`); nil when the delta ends first.
    private static func copyOperands(_ command: UInt8, _ delta: [UInt8], _ position: inout Int) -> (offset: Int, size: Int)? {
        var offset = 0, size = 0
        for bit in 0..<4 where command & (1 << bit) != 0 {
            guard position < delta.count else { return nil }
            offset |= Int(delta[position]) << (8 * bit)
            position += 1
        }
        for bit in 0..<3 where command & (0x10 << bit) != 0 {
            guard position < delta.count else { return nil }
            size |= Int(delta[position]) << (8 * bit)
            position += 1
        }
        return (offset, size == 0 ? 0x10000 : size)
    }

    // MARK: - Instructions

    /// Collects instructions: a copy extended while the next entry copied follows in the base,
    /// literal bytes gathered while the target's entries are inserted one after another.
    private struct Encoder {
        let base: UnsafeRawBufferPointer
        let target: UnsafeRawBufferPointer
        var out: [UInt8] = []
        /// The copy being extended: base offset and length.
        var pendingCopy: (offset: Int, count: Int)?
        /// Where the next target byte not yet in an instruction starts.
        var written = 0
        /// Where the literal bytes being gathered start in the target (nil: none).
        var pendingInsert: Int?

        init(base: UnsafeRawBufferPointer, target: UnsafeRawBufferPointer) {
            self.base = base
            self.target = target
            TreeDelta.appendVarint(base.count, to: &out)
            TreeDelta.appendVarint(target.count, to: &out)
        }

        mutating func copy(baseOffset: Int, count: Int) {
            flushInsert()
            if let copy = pendingCopy, copy.offset + copy.count == baseOffset {
                pendingCopy = (copy.offset, copy.count + count)
            } else {
                flushCopy()
                pendingCopy = (baseOffset, count)
            }
            written += count
        }

        /// The target's bytes from `written` up to `end` are inserted.
        mutating func insert(upTo end: Int) {
            flushCopy()
            if pendingInsert == nil { pendingInsert = written }
            written = end
        }

        mutating func finish() -> [UInt8] {
            flushCopy()
            flushInsert()
            return out
        }

        private mutating func flushCopy() {
            guard var (offset, count) = pendingCopy else { return }
            pendingCopy = nil
            while count > 0 {
                let size = min(count, TreeDelta.maxCopy)
                var command: UInt8 = 0x80
                var operands: [UInt8] = []
                for bit in 0..<4 where (offset >> (8 * bit)) & 0xFF != 0 {
                    command |= 1 << bit
                    operands.append(UInt8(truncatingIfNeeded: offset >> (8 * bit)))
                }
                // 0x10000 is written as no size bytes at all.
                if size != 0x10000 {
                    for bit in 0..<3 where (size >> (8 * bit)) & 0xFF != 0 {
                        command |= 0x10 << bit
                        operands.append(UInt8(truncatingIfNeeded: size >> (8 * bit)))
                    }
                }
                out.append(command)
                out += operands
                offset += size
                count -= size
            }
        }

        private mutating func flushInsert() {
            guard let start = pendingInsert else { return }
            pendingInsert = nil
            var position = start
            while position < written {
                let count = min(TreeDelta.maxInsert, written - position)
                out.append(UInt8(count))
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: target[position..<position + count]))
                position += count
            }
        }
    }

    static func appendVarint(_ value: Int, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// A base-128 number at `position` (moved past it); nil when the bytes end first.
    static func varint(_ bytes: [UInt8], _ position: inout Int) -> Int? {
        var value = 0, shift = 0
        while position < bytes.count, shift < 63 {
            let byte = bytes[position]
            position += 1
            value |= Int(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }
}

/// The fuzz target's entry (`binder-fuzz tree-delta`): trees come from the repository, a fold
/// makes deltas of them, and a tree libgit2 refuses is read from its bytes.
@_spi(Fuzzing)
public enum TreeDeltaFuzzing {
    /// Input: two bytes giving where the base ends (big-endian, past the end: all of it), then
    /// the base's bytes and the target's. When both parse as trees, the delta must rebuild the
    /// target exactly, and a history walk's comparison of the two must end; the input's bytes
    /// are also applied as a delta to the base, which must give nil or a result of the size
    /// the delta names. Returns what went wrong, nil if nothing.
    public static func run(_ bytes: [UInt8]) -> String? {
        guard bytes.count >= 2 else { return nil }
        let data = Array(bytes.dropFirst(2))
        let split = min(Int(bytes[0]) << 8 | Int(bytes[1]), data.count)
        let base = Array(data[..<split]), target = Array(data[split...])
        if let delta = base.withUnsafeBytes({ b in target.withUnsafeBytes { TreeDelta.encode(from: b, to: $0) } }) {
            guard base.withUnsafeBytes({ TreeDelta.apply(delta, to: $0) }) == target,
                  base.withUnsafeBytes({ b in target.withUnsafeBytes { TreeDelta.rebuilds(delta, from: b, exactly: $0) } }) else {
                return "a delta does not rebuild its target"
            }
        }
        // A history walk compares two trees' bytes the same way (`ParsedTree.differences`).
        if let old = ParsedTree(base), let new = ParsedTree(target), let found = ParsedTree.differences(from: old, to: new) {
            guard found.allSatisfy({ $0.isTree || $0.new == nil }) else { return "a file reported with a counterpart" }
        }
        if let rebuilt = base.withUnsafeBytes({ TreeDelta.apply(target, to: $0) }) {
            var position = 0
            let sizes = [TreeDelta.varint(target, &position), TreeDelta.varint(target, &position)]
            guard rebuilt.count == sizes[1] else { return "a delta applied gives another size than it names" }
            guard base.withUnsafeBytes({ b in rebuilt.withUnsafeBytes { TreeDelta.rebuilds(target, from: b, exactly: $0) } }) else {
                return "a delta applied is not what the same delta checks as rebuilt"
            }
        }
        // A tree libgit2 refuses is read from its bytes (`FolderEntries.lenient`): any bytes
        // read without a trap, and every entry read takes at least its mode, a space, a NUL
        // and its 20-byte id.
        for tree in [base, target] {
            if let entries = tree.withUnsafeBytes({ FolderEntries.lenient($0) }), entries.count * 23 > tree.count {
                return "a tree read from its bytes holds more entries than they can"
            }
        }
        return nil
    }
}
