internal import CGit2

/// The repository's own config file (`.git/config`), read and written by name.
/// `GitRepository.config`.
public struct GitConfig: Sendable {
    /// The repository whose handle this owner uses, under its lock.
    let repository: GitRepository

    /// A value of the repository's own config (`.git/config`); nil when unset.
    public func value(_ name: String) throws(GitError) -> String? {
        try repository.locked { () throws(GitError) in
            var config: OpaquePointer?
            try check(git_repository_config(&config, repository.repo.pointer), "open config")
            defer { git_config_free(config) }
            var buffer = git_buf()
            defer { git_buf_dispose(&buffer) }
            let rc = git_config_get_string_buf(&buffer, config, name)
            if rc == GIT_ENOTFOUND.rawValue { return nil }
            try check(rc, "read config \(name)")
            return String(cString: buffer.ptr)
        }
    }

    /// Removes `name` from the repository's own config file; nothing when it is not there.
    public func removeValue(_ name: String) throws(GitError) {
        try withLocalConfig { (local) throws(GitError) in
            let rc = git_config_delete_entry(local, name)
            if rc == GIT_ENOTFOUND.rawValue { return }
            try check(rc, "remove config \(name)")
        }
    }

    /// Sets a value in the repository's own config file.
    public func setValue(_ name: String, _ value: String) throws(GitError) {
        try withLocalConfig { (local) throws(GitError) in try check(git_config_set_string(local, name, value), "write config \(name)") }
    }

    /// `body` on the repository's own config file (not the user's or the system's), under its lock.
    private func withLocalConfig(_ body: (OpaquePointer?) throws(GitError) -> Void) throws(GitError) {
        try repository.locked { () throws(GitError) in
            var config: OpaquePointer?
            try check(git_repository_config(&config, repository.repo.pointer), "open config")
            defer { git_config_free(config) }
            var local: OpaquePointer?
            try check(git_config_open_level(&local, config, GIT_CONFIG_LEVEL_LOCAL), "open local config")
            defer { git_config_free(local) }
            try body(local)
        }
    }
}
