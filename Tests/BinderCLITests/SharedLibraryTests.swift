import BinderSystem
import XCTest

/// `SharedLibrarySymbols` (libzbar, libqrencode, Pango and Cairo are opened through it at their
/// first use): a table is filled in the order of its names, and each way of failing is told
/// apart by its kind, naming the file or the entry point.
final class SharedLibraryTests: XCTestCase {
    /// Two entry points of libc, laid out as a shim's struct is (one non-null pointer each).
    struct StringFunctions {
        let strlen: @convention(c) (UnsafePointer<CChar>) -> Int
        let atoi: @convention(c) (UnsafePointer<CChar>) -> Int32
    }

    func testEntryPointsFillTheTableInTheOrderOfTheirNames() throws {
        let symbols = try SharedLibrarySymbols<StringFunctions>([(file: "libc.so.6", names: ["strlen", "atoi"])])
        XCTAssertEqual(symbols.entries.strlen("binder"), 6)
        XCTAssertEqual(symbols.entries.atoi("451"), 451)
    }

    func testEachFailureNamesWhatIsMissing() {
        let cases: [(parts: [(file: String, names: [String])], library: String, kind: SharedLibraryError.Kind, words: String)] = [
            ([(file: "libbinder-absent.so.0", names: ["strlen", "atoi"])], "libbinder-absent.so.0", .notLoaded,
             "libbinder-absent.so.0"),
            ([(file: "libc.so.6", names: ["strlen", "binder_no_such_function"])], "libc.so.6",
             .missingSymbol("binder_no_such_function"), "binder_no_such_function"),
            // The second file is the one missing: the first was opened and resolved.
            ([(file: "libc.so.6", names: ["strlen"]), (file: "libbinder-absent.so.0", names: ["atoi"])],
             "libbinder-absent.so.0", .notLoaded, "libbinder-absent.so.0"),
            ([(file: "libc.so.6", names: ["strlen"])], "libc.so.6", .tableMismatch(entries: 2, names: 1), "does not match"),
        ]
        for (parts, library, kind, words) in cases {
            do {
                _ = try SharedLibrarySymbols<StringFunctions>(parts)
                XCTFail("\(parts) opened")
            } catch {
                XCTAssertEqual(error.library, library)
                XCTAssertEqual(error.kind, kind)
                XCTAssertTrue(error.description.contains(words), error.description)
            }
        }
    }
}
