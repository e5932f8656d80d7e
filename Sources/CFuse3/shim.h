#ifndef BINDER_CFUSE3_SHIM_H
#define BINDER_CFUSE3_SHIM_H
/* The libfuse API version binder is written against. fuse_new and fuse_loop_mt are
   version-dispatching macros in fuse.h, so Swift calls them through these shims. */
#define FUSE_USE_VERSION 31
#include <fuse.h>
#include <fuse_lowlevel.h>

static inline struct fuse *binder_fuse_new(struct fuse_args *args, const struct fuse_operations *ops,
                                           void *private_data) {
    return fuse_new(args, ops, sizeof(struct fuse_operations), private_data);
}

static inline int binder_fuse_loop_mt(struct fuse *f, int clone_fd, unsigned int max_idle_threads) {
    struct fuse_loop_config config;
    config.clone_fd = clone_fd;
    config.max_idle_threads = max_idle_threads;
    return fuse_loop_mt(f, &config);
}

static inline struct fuse_args binder_fuse_args_init(int argc, char **argv) {
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    return args;
}
#endif
