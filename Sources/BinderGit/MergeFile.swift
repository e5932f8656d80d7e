internal import CGit2
import Glibc

/// Three-way merge of text, as git merges a file's lines (libgit2's `git_merge_file`).
public enum TextMerge {
    /// The text with both sides' changes to `base`, or nil when they touch the same lines (or
    /// libgit2 cannot merge them). Works in memory: nothing is written to the repository.
    public static func merge(base: String, ours: String, theirs: String) -> String? {
        _ = LibGit2.ready
        var result = git_merge_file_result()
        let rc = withInput(base) { ancestor in
            withInput(ours) { local in
                withInput(theirs) { remote in git_merge_file(&result, ancestor, local, remote, nil) }
            }
        }
        defer {
            // The merged text is plaintext: zeroed before libgit2 frees it.
            if let pointer = result.ptr { memset(UnsafeMutableRawPointer(mutating: pointer), 0, result.len) }
            git_merge_file_result_free(&result)
        }
        guard rc == 0, result.automergeable != 0 else { return nil }
        guard let pointer = result.ptr else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: result.len), as: UTF8.self)
    }

    private static func withInput<T>(_ text: String, _ body: (UnsafePointer<git_merge_file_input>) -> T) -> T {
        var bytes = Array(text.utf8)
        defer { secureZeroBytes(&bytes) }
        return bytes.withUnsafeBufferPointer { buffer in
            var input = git_merge_file_input()
            git_merge_file_input_init(&input, UInt32(GIT_MERGE_FILE_INPUT_VERSION))
            input.ptr = buffer.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }
            input.size = buffer.count
            input.mode = 0o100644
            return body(&input)
        }
    }

    private static func secureZeroBytes(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return }
            memset(base, 0, raw.count)
        }
    }
}
