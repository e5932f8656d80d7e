/// A JSON object as an ordered list of unique keys.
///
/// Order matters because documents must serialise back exactly as the apps wrote them,
/// and because the front matter a user sees should list `type`, `created`… as stored.
/// Keys are unique and compared by their UTF-8 bytes (see `String.hasSameUTF8(as:)`).
/// Setting an existing key keeps its position; a new key is appended.
///
/// Lookups are linear: objects in medical documents have a handful of keys, and a
/// linear scan keeps the type a plain array that is cheap to copy and compare.
public struct JSONObject: Sendable {
    public typealias Element = (key: String, value: JSONValue)

    private var storage: [Element]

    public init() {
        storage = []
    }

    /// Builds an object from pairs in order. A repeated key keeps the position of its
    /// first occurrence and the value of its last, as JavaScript's `JSON.parse` does.
    public init<S: Sequence>(_ pairs: S) where S.Element == (String, JSONValue) {
        storage = []
        var seen = UTF8KeyIndex()
        for (key, value) in pairs {
            if let index = seen.index(of: key, in: storage) {
                storage[index].value = value
            } else {
                seen.insert(key, at: storage.count)
                storage.append((key, value))
            }
        }
    }

    public var keys: [String] { storage.map(\.key) }
    public var values: [JSONValue] { storage.map(\.value) }

    public func index(forKey key: String) -> Int? {
        storage.firstIndex { $0.key.hasSameUTF8(as: key) }
    }

    public func contains(key: String) -> Bool {
        index(forKey: key) != nil
    }

    /// Gets or sets a value by key. Setting keeps the key's position (or appends a new
    /// key); setting `nil` removes the key.
    public subscript(key: String) -> JSONValue? {
        get {
            index(forKey: key).map { storage[$0].value }
        }
        set {
            if let newValue {
                updateValue(newValue, forKey: key)
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// Sets a value, keeping the key's position if it exists. Returns the old value.
    @discardableResult
    public mutating func updateValue(_ value: JSONValue, forKey key: String) -> JSONValue? {
        if let index = index(forKey: key) {
            let old = storage[index].value
            storage[index].value = value
            return old
        }
        storage.append((key, value))
        return nil
    }

    /// Inserts a key at a position (clamped to the valid range); an existing key is moved there.
    public mutating func insert(_ value: JSONValue, forKey key: String, at position: Int) {
        removeValue(forKey: key)
        storage.insert((key, value), at: Swift.max(0, Swift.min(position, storage.count)))
    }

    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSONValue? {
        guard let index = index(forKey: key) else { return nil }
        return storage.remove(at: index).value
    }
}

extension JSONObject: RandomAccessCollection {
    public var startIndex: Int { storage.startIndex }
    public var endIndex: Int { storage.endIndex }
    public subscript(position: Int) -> Element { storage[position] }
}

extension JSONObject: Equatable {
    /// Same keys in the same order with equal values (keys by bytes).
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.storage.count == rhs.storage.count
            && zip(lhs.storage, rhs.storage).allSatisfy { $0.key.hasSameUTF8(as: $1.key) && $0.value == $1.value }
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    /// Keeps the literal's order.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements)
    }
}

/// Finds keys by bytes while an object is being built, so that building an object with
/// thousands of keys (a hostile or generated document) stays linear. Small objects, the
/// normal case, are scanned directly without hashing.
struct UTF8KeyIndex {
    private static let hashingThreshold = 16
    private var positions: [UTF8Key: Int] = [:]
    private var count = 0

    func index(of key: String, in storage: [JSONObject.Element]) -> Int? {
        if count < Self.hashingThreshold {
            return storage.firstIndex { $0.key.hasSameUTF8(as: key) }
        }
        return positions[UTF8Key(key)]
    }

    mutating func insert(_ key: String, at position: Int) {
        count += 1
        positions[UTF8Key(key)] = position
    }
}

/// A dictionary key that hashes and compares a string by its UTF-8 bytes.
struct UTF8Key: Hashable {
    let string: String
    init(_ string: String) { self.string = string }

    static func == (lhs: UTF8Key, rhs: UTF8Key) -> Bool {
        lhs.string.hasSameUTF8(as: rhs.string)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(string.utf8.count)
        for byte in string.utf8 { hasher.combine(byte) }
    }
}
