#ifndef BINDER_CFUSE3_SHIM_H
#define BINDER_CFUSE3_SHIM_H
/* The libfuse API version binder is written against. fuse_new and fuse_loop_mt are
   version-dispatching macros in fuse.h, so Swift calls them through these shims. */
#define FUSE_USE_VERSION 31
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <errno.h>
#include <sys/stat.h>
#include <string.h>

static inline struct fuse *binder_fuse_new(struct fuse_args *args, const struct fuse_operations *ops,
                                           void *private_data) {
    return fuse_new(args, ops, sizeof(struct fuse_operations), private_data);
}

/* Multi-threaded loop; each worker thread reads /dev/fuse through the one session fd. */
static inline int binder_fuse_loop_mt(struct fuse *f) {
    return fuse_loop_mt(f, 0);
}

/* Tells the kernel to forget the name `name` in the folder whose node id is `parent` (the high-level
   API only invalidates inodes). With use_ino off, a folder's st_ino is its node id. */
static inline int binder_fuse_forget_entry(struct fuse *f, unsigned long parent, const char *name) {
    return fuse_lowlevel_notify_inval_entry(fuse_get_session(f), parent, name, strlen(name));
}

/* FUSE_CAP_CACHE_SYMLINKS (kernel >= 4.20): the kernel keeps a link's target in its page cache
   and asks readlink once per inode, until the inode is invalidated (fuse_invalidate_path drops
   the pages with the attributes). Asked for when the kernel offers it; returns whether it did. */
static inline int binder_fuse_want_cache_symlinks(struct fuse_conn_info *conn) {
    if (!(conn->capable & FUSE_CAP_CACHE_SYMLINKS)) return 0;
    conn->want |= FUSE_CAP_CACHE_SYMLINKS;
    return 1;
}

static inline struct fuse_args binder_fuse_args_empty(void) {
    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
    return args;
}

/* Bitfields of struct fuse_file_info, set from Swift without relying on bitfield import. */
static inline void binder_fi_set_keep_cache(struct fuse_file_info *fi, int on) { fi->keep_cache = on ? 1 : 0; }
static inline void binder_fi_set_direct_io(struct fuse_file_info *fi, int on) { fi->direct_io = on ? 1 : 0; }
/* FOPEN_NOFLUSH: close() of this handle sends no FLUSH request (kernel >= 5.16). */
static inline void binder_fi_set_noflush(struct fuse_file_info *fi, int on) { fi->noflush = on ? 1 : 0; }

static inline enum fuse_fill_dir_flags binder_fill_dir_plus(void) { return FUSE_FILL_DIR_PLUS; }

/* utimensat(2)'s special nanosecond values (macros). */
static inline long binder_utime_now(void) { return UTIME_NOW; }
static inline long binder_utime_omit(void) { return UTIME_OMIT; }
#endif
