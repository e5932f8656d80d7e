import Glibc

/// Why a shared library opened at its first use could not be: the library's file, the entry
/// point when it was one that was missing, and dlerror's words.
public struct SharedLibraryError: Error, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// dlopen failed: the file is not installed (or not loadable).
        case notLoaded
        /// The library loaded, but lacks `symbol` (an older version).
        case missingSymbol(String)
        /// The C table's size is not one pointer per name given: the shim and its list disagree.
        case tableMismatch(entries: Int, names: Int)
    }

    public let library: String
    public let kind: Kind
    /// dlerror's text (it names the file and the symbol), or ours when it gave none.
    public let reason: String

    public var description: String { reason }
}

/// One shared library opened with `dlopen` (RTLD_NOW | RTLD_LOCAL) and closed in deinit. The
/// symbol tables below hold theirs in a static, so a library stays loaded while the process
/// runs (GLib's types, for one, cannot be unloaded), and the entry points they hand out stay
/// valid.
public final class SharedLibrary: @unchecked Sendable {  // the handle is never changed after init
    public let file: String
    private let handle: UnsafeMutableRawPointer

    public init(_ file: String) throws(SharedLibraryError) {
        self.file = file
        guard let handle = dlopen(file, RTLD_NOW | RTLD_LOCAL) else {
            throw SharedLibraryError(library: file, kind: .notLoaded, reason: Self.lastError() ?? "\(file): cannot be opened")
        }
        self.handle = handle
    }

    /// The address of the entry point `name`.
    public func symbol(_ name: String) throws(SharedLibraryError) -> UnsafeMutableRawPointer {
        _ = dlerror()  // clears an earlier error: the one read below is this call's
        guard let address = dlsym(handle, name) else {
            throw SharedLibraryError(library: file, kind: .missingSymbol(name), reason: Self.lastError() ?? "\(name): not found")
        }
        return address
    }

    deinit { dlclose(handle) }

    private static func lastError() -> String? { dlerror().map { String(cString: $0) } }
}

/// The entry points of one or more shared libraries in a C table: `Table` is a struct of
/// non-null function pointers, each typed by the library's header (a shim's X-macro declares it
/// and lists the names, in the struct's order). The libraries are opened and every name
/// resolved when this is made: a user keeps one in a static, made at its first call.
public final class SharedLibrarySymbols<Table>: @unchecked Sendable {  // immutable once made
    /// The entry points; valid while this object lives.
    public let entries: Table
    private let libraries: [SharedLibrary]

    /// A shim's list of names: a C function giving `count` C strings.
    public typealias Names = (UnsafeMutablePointer<UInt>) -> UnsafePointer<UnsafePointer<CChar>>

    /// Opens each `file` in turn and resolves the names its shim lists into the next fields of
    /// the table.
    public convenience init(_ libraries: [(file: String, names: Names)]) throws(SharedLibraryError) {
        try self.init(libraries.map { library in
            var count: UInt = 0
            let names = library.names(&count)
            return (file: library.file, names: UnsafeBufferPointer(start: names, count: Int(count)).map { String(cString: $0) })
        })
    }

    /// Opens each `file` in turn and resolves its `names` into the next fields of the table.
    public init(_ parts: [(file: String, names: [String])]) throws(SharedLibraryError) {
        let pointerSize = MemoryLayout<UnsafeRawPointer>.stride
        let count = parts.reduce(0) { $0 + $1.names.count }
        guard MemoryLayout<Table>.size == count * pointerSize, MemoryLayout<Table>.alignment == pointerSize else {
            throw SharedLibraryError(library: parts.map(\.file).joined(separator: ", "),
                                     kind: .tableMismatch(entries: MemoryLayout<Table>.size / pointerSize, names: count),
                                     reason: "the entry point table does not match its list of names")
        }
        var opened: [SharedLibrary] = []
        var addresses: [UnsafeMutableRawPointer] = []
        for part in parts {
            let library = try SharedLibrary(part.file)
            opened.append(library)
            for name in part.names { addresses.append(try library.symbol(name)) }
        }
        // Every field is a non-null pointer, in the order of the names: the table is these
        // addresses, laid end to end.
        entries = addresses.withUnsafeBytes { $0.load(as: Table.self) }
        self.libraries = opened
    }
}
