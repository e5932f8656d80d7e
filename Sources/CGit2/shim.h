#ifndef BINDER_CGIT2_SHIM_H
#define BINDER_CGIT2_SHIM_H
#include <git2.h>
/* The smart transport interface: fetch and push carried over binder's own HTTP client. */
#include <git2/sys/transport.h>
/* A commit's objects are staged in memory and written as one pack (BinderGit's Commit.swift). */
#include <git2/sys/mempack.h>
#include <git2/sys/repository.h>
/* An in-memory config level with the pack builder's settings for serving (BinderGit's ServedPackSettings.swift). */
#include <git2/sys/config.h>

/*
 * git_libgit2_opts() is variadic and cannot be called from Swift; these
 * shims expose the few options binder sets. Each returns libgit2's result
 * (0 on success, < 0 on error).
 */

/* GIT_OPT_ENABLE_FSYNC_GITDIR: fsync objects, refs and the index (and their
 * parent directories) before renaming them into place. */
static inline int binder_git_enable_fsync(int enabled) {
    return git_libgit2_opts(GIT_OPT_ENABLE_FSYNC_GITDIR, enabled);
}

/* GIT_OPT_ENABLE_STRICT_OBJECT_CREATION: validate that referenced objects
 * exist and that tree entry names are safe when creating objects (on by
 * default; set explicitly so binder never depends on a changed default). */
static inline int binder_git_enable_strict_object_creation(int enabled) {
    return git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, enabled);
}

/* GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION: hash every object again each time it
 * is read (on by default; git itself does not). */
static inline int binder_git_enable_strict_hash_verification(int enabled) {
    return git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, enabled);
}

/* GIT_OPT_SET_MWINDOW_SIZE / GIT_OPT_SET_MWINDOW_MAPPED_LIMIT: how much of a
 * pack libgit2 maps per window, and in all (least recently used windows are
 * unmapped past the limit). The 64-bit defaults (1 GiB, 8 GiB) keep every page
 * of a pack read once mapped, which counts in the daemon's resident memory. */
static inline int binder_git_set_pack_windows(size_t window_size, size_t mapped_limit) {
    int rc = git_libgit2_opts(GIT_OPT_SET_MWINDOW_SIZE, window_size);
    if (rc < 0) return rc;
    return git_libgit2_opts(GIT_OPT_SET_MWINDOW_MAPPED_LIMIT, mapped_limit);
}

/* GIT_OPT_SET_CACHE_MAX_SIZE: the bytes of parsed objects (commits and trees up to 4 KiB
 * each) libgit2 keeps across reads, in all repositories of the process. The default is
 * 256 MiB, so every commit a history walk read stayed in memory. */
static inline int binder_git_set_cache_max_size(ssize_t bytes) {
    return git_libgit2_opts(GIT_OPT_SET_CACHE_MAX_SIZE, bytes);
}

/* GIT_OPT_SET_CACHE_OBJECT_LIMIT for blobs: the largest blob kept in the object cache. 0 (also
 * libgit2's default) caches none, so a looked-up blob is referenced by its caller alone. */
static inline int binder_git_set_blob_cache_limit(size_t bytes) {
    return git_libgit2_opts(GIT_OPT_SET_CACHE_OBJECT_LIMIT, GIT_OBJECT_BLOB, bytes);
}

#endif
