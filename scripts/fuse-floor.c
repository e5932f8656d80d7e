// fuse-floor: what FUSE alone costs. Serves a copy of a folder, held in memory, read-only,
// through the libfuse high-level API with binder's options (keep_cache, cached folders, 60 s
// timeouts, the multi-threaded loop, noflush); nothing is decrypted, parsed or looked up in git.
// Built and driven by scripts/fuse-floor (see docs/BENCHMARKS.md, "The FUSE floor"), and by
// scripts/bench for its floor columns (plain, and NO_OPEN=1 beside the read-only rows).
// With LINKS=N in the environment it also serves /links: N symbolic links in one folder, as
// .binder/timeline is; with CACHE_SYMLINKS=1 the kernel keeps the links' targets.
// With NO_OPEN=1 open answers ENOSYS, after which the kernel sends no OPEN and no RELEASE for
// any file (FUSE_CAP_NO_OPEN_SUPPORT); a file opened without an OPEN carries no noflush, and
// libfuse answers FLUSH with ENOSYS (no flush operation), after which the kernel sends no FLUSH
// either. With CLOSE_FLUSH=1 a flush operation answers 0, so every close() still asks the file
// system, as one that stores a file when it is closed must (binder: close() returns once
// committed).
// usage: fuse-floor SOURCE MOUNTPOINT
#define FUSE_USE_VERSION 31
#include <fuse.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct entry { char *path; int dir; char *data; size_t size; int link; };
static struct entry *entries; static size_t count, capacity;

static void add(const char *path, int dir, char *data, size_t size) {
    if (count == capacity) { capacity = capacity ? capacity * 2 : 1024; entries = realloc(entries, capacity * sizeof *entries); }
    entries[count++] = (struct entry){strdup(path), dir, data, size, 0};
}

static void load(const char *root, const char *rel) {
    char full[4096]; snprintf(full, sizeof full, "%s%s", root, rel);
    DIR *d = opendir(full); struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char r[4096]; snprintf(r, sizeof r, "%s/%s", rel, e->d_name);
        char f[4096]; snprintf(f, sizeof f, "%s%s", root, r);
        struct stat st; stat(f, &st);
        if (S_ISDIR(st.st_mode)) { add(r, 1, NULL, 0); load(root, r); }
        else { int fd = open(f, O_RDONLY); char *b = malloc(st.st_size ? st.st_size : 1); size_t n = 0;
               while (n < (size_t)st.st_size) { ssize_t k = read(fd, b + n, st.st_size - n); if (k <= 0) break; n += k; }
               close(fd); add(r, 0, b, n); }
    }
    closedir(d);
}

static int cmp(const void *a, const void *b) { return strcmp(((const struct entry *)a)->path, ((const struct entry *)b)->path); }
static struct entry *find(const char *path) {
    struct entry key = {(char *)path}; return bsearch(&key, entries, count, sizeof *entries, cmp);
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
    /* CACHE_SYMLINKS=1: the kernel keeps what readlink answered (binder does not: see
       docs/BENCHMARKS.md, "Where each goal stands"). */
    if (getenv("CACHE_SYMLINKS") && (conn->capable & FUSE_CAP_CACHE_SYMLINKS)) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
    cfg->entry_timeout = 60; cfg->attr_timeout = 60; cfg->negative_timeout = 5; cfg->use_ino = 0; return NULL;
}
static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    (void)fi; memset(st, 0, sizeof *st);
    if (!strcmp(path, "/")) { st->st_mode = S_IFDIR | 0700; st->st_nlink = 2; return 0; }
    struct entry *e = find(path); if (!e) return -ENOENT;
    st->st_mode = e->dir ? (S_IFDIR | 0700) : e->link ? (S_IFLNK | 0777) : (S_IFREG | 0600); st->st_nlink = 1; st->st_size = e->size; return 0;
}
static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi, enum fuse_readdir_flags flags) {
    (void)off; (void)fi; (void)flags;
    size_t plen = strcmp(path, "/") ? strlen(path) : 0;
    fill(buf, ".", NULL, 0, 0); fill(buf, "..", NULL, 0, 0);
    for (size_t i = 0; i < count; i++) {
        const char *p = entries[i].path;
        if (strncmp(p, path, plen) || p[plen] != '/' || strchr(p + plen + 1, '/')) continue;
        struct stat st; fs_getattr(p, &st, NULL);
        fill(buf, p + plen + 1, &st, 0, FUSE_FILL_DIR_PLUS);
    }
    return 0;
}
static int fs_opendir(const char *path, struct fuse_file_info *fi) { (void)path; fi->cache_readdir = 1; fi->keep_cache = 1; return 0; }
static int fs_open(const char *path, struct fuse_file_info *fi) {
    if (getenv("NO_OPEN")) return -ENOSYS;
    if (!find(path)) return -ENOENT; fi->keep_cache = 1; fi->noflush = 1; return 0;
}
static int fs_flush(const char *path, struct fuse_file_info *fi) { (void)path; (void)fi; return 0; }
static int fs_readlink(const char *path, char *buf, size_t size) {
    struct entry *e = find(path); if (!e || !e->link) return -EINVAL;
    snprintf(buf, size, "%s", e->data); return 0;
}
static int fs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)fi; struct entry *e = find(path); if (!e) return -ENOENT;
    if ((size_t)off >= e->size) return 0; if (off + size > e->size) size = e->size - off;
    memcpy(buf, e->data + off, size); return size;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: floorfs SOURCE MOUNTPOINT\n"); return 2; }
    load(argv[1], "");
    int links = getenv("LINKS") ? atoi(getenv("LINKS")) : 0;
    if (links) { add("/links", 1, NULL, 0);
        for (int i = 0; i < links; i++) { char n[64], t[128]; snprintf(n, sizeof n, "/links/2020-01-01 record %06d", i);
            snprintf(t, sizeof t, "../../visits/2020-01-01-record-%06d.md", i); add(n, 0, strdup(t), strlen(t)); entries[count-1].link = 1; } } qsort(entries, count, sizeof *entries, cmp);
    static struct fuse_operations ops = {.init = fs_init, .getattr = fs_getattr, .readdir = fs_readdir,
                                         .opendir = fs_opendir, .open = fs_open, .read = fs_read, .readlink = fs_readlink};
    if (getenv("CLOSE_FLUSH")) ops.flush = fs_flush;
    char *args[] = {argv[0], argv[2], "-o", "fsname=floorfs", NULL};
    return fuse_main(4, args, &ops, NULL);
}
