/* Variadic and syscall-only Linux interfaces, which Swift cannot call directly. Compiled here,
   with _GNU_SOURCE, so that no Swift-visible header changes glibc's declarations (Clang modules
   reject a struct defined differently in two modules). */
#define _GNU_SOURCE
#include <sys/vfs.h>
#include "clinux.h"
#include <fcntl.h>
#include <malloc.h>
#include <linux/keyctl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>


int binder_set_nondumpable(void) {
    struct rlimit none = {0, 0};
    int a = prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    int b = setrlimit(RLIMIT_CORE, &none);
    return (a == 0 && b == 0) ? 0 : -1;
}

int binder_malloc_tune(int mmap_threshold, int arena_max) {
    int a = mallopt(M_MMAP_THRESHOLD, mmap_threshold);
    int b = mallopt(M_ARENA_MAX, arena_max);
    return (a == 1 && b == 1) ? 0 : -1;
}

size_t binder_heap_bytes_in_use(void) { return mallinfo2().uordblks; }

int binder_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

short binder_posix_spawn_setsid(void) { return POSIX_SPAWN_SETSID; }

/* The daemon must not inherit the launcher's other descriptors (a caller waiting for EOF on a
   pipe would otherwise wait for the daemon's whole life). */
int binder_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}

int binder_run_in_foreground(const char *path, char *const argv[], char *const envp[]) {
    struct sigaction ignore, savedInterrupt, savedQuit;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    if (sigaction(SIGINT, &ignore, &savedInterrupt) != 0) return -1;
    if (sigaction(SIGQUIT, &ignore, &savedQuit) != 0) {
        int code = errno;
        sigaction(SIGINT, &savedInterrupt, NULL);
        errno = code;
        return -1;
    }
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawnattr_init(&attributes);
    sigset_t defaults, empty;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGQUIT);
    sigemptyset(&empty);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setsigmask(&attributes, &empty);
    /* No POSIX_SPAWN_SETPGROUP and no setsid: a program in a group of its own is stopped by the
       terminal (SIGTTIN, SIGTTOU) the moment it reads or sets it up. */
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    int spawned = posix_spawnp(&pid, path, &actions, &attributes, argv, envp);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    int status = -1, code = spawned;
    if (spawned == 0) {
        pid_t waited;
        do { waited = waitpid(pid, &status, 0); } while (waited < 0 && errno == EINTR);
        code = waited < 0 ? errno : 0;
        if (waited < 0) status = -1;
    }
    sigaction(SIGINT, &savedInterrupt, NULL);
    sigaction(SIGQUIT, &savedQuit, NULL);
    errno = code;
    return status;
}

int binder_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

long binder_add_key(const char *type, const char *description, const void *payload,
                                  size_t plen, int32_t keyring) {
    return syscall(SYS_add_key, type, description, payload, plen, keyring);
}

long binder_request_key(const char *type, const char *description, int32_t keyring) {
    return syscall(SYS_request_key, type, description, NULL, keyring);
}

long binder_keyctl_read(int32_t key, void *buffer, size_t buflen) {
    return syscall(SYS_keyctl, KEYCTL_READ, key, buffer, buflen, 0);
}

long binder_keyctl_set_timeout(int32_t key, unsigned int seconds) {
    return syscall(SYS_keyctl, KEYCTL_SET_TIMEOUT, key, seconds, 0, 0);
}

long binder_keyctl_revoke(int32_t key) {
    return syscall(SYS_keyctl, KEYCTL_REVOKE, key, 0, 0, 0);
}

long binder_keyctl_unlink(int32_t key, int32_t keyring) {
    return syscall(SYS_keyctl, KEYCTL_UNLINK, key, keyring, 0, 0);
}

long binder_keyctl_get_keyring_id(int32_t keyring, int create) {
    return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, keyring, create, 0, 0);
}

long binder_keyctl_setperm(int32_t key, uint32_t perm) {
    return syscall(SYS_keyctl, KEYCTL_SETPERM, key, perm, 0, 0);
}

int32_t binder_key_spec_user_keyring(void) { return KEY_SPEC_USER_KEYRING; }
int32_t binder_key_spec_session_keyring(void) { return KEY_SPEC_SESSION_KEYRING; }

static int binder_unix_address(const char *path, struct sockaddr_un *address) {
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof address->sun_path) { errno = ENAMETOOLONG; return -1; }
    strcpy(address->sun_path, path);
    return 0;
}

int binder_unix_listen(const char *path, int backlog) {
    struct sockaddr_un address;
    if (binder_unix_address(path, &address) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (bind(fd, (struct sockaddr *)&address, sizeof address) != 0 || listen(fd, backlog) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int binder_unix_connect(const char *path) {
    struct sockaddr_un address;
    if (binder_unix_address(path, &address) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int rc;
    do { rc = connect(fd, (struct sockaddr *)&address, sizeof address); } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int binder_unix_accept(int listener) { return accept4(listener, NULL, NULL, SOCK_CLOEXEC); }

int binder_peer_uid(int fd, uint32_t *uid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *uid = credentials.uid;
    return 0;
}

long binder_fs_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long)info.f_type;
}

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

/* See clinux.h. One pass over /proc/self/smaps: a mapping's header line, then its fields; the
   decision for a mapping is taken at its last field (VmFlags), once Anonymous and Locked are
   known. Executable mappings only: the dynamic loader writes (relocates) read-only data before
   protecting it, and a library loaded while this runs could be written between the read of its
   fields and the madvise, which would throw the writes away; code is never written. */
long binder_release_code_pages(void) {
    FILE *smaps = fopen("/proc/self/smaps", "re");
    if (smaps == NULL) return -1;
    char line[4096];
    unsigned long start = 0, end = 0;
    int candidate = 0;
    long anonymous = -1, locked = -1, released = 0;
    int continued = 0;
    while (fgets(line, sizeof line, smaps) != NULL) {
        unsigned long a, b;
        char perms[8];
        int path_at = 0;
        /* The rest of a line longer than the buffer (a long path) is never read as a line of
           its own; its mapping is left alone. */
        int was_continued = continued;
        continued = strchr(line, '\n') == NULL;
        if (was_continued || continued) {
            candidate = 0;
            continue;
        }
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &a, &b, perms, &path_at) == 3) {
            start = a;
            end = b;
            /* Code of a file named by a path: readable, executable, not writable, private. */
            candidate = strcmp(perms, "r-xp") == 0 && path_at > 0 && line[path_at] == '/';
            anonymous = -1;
            locked = -1;
        } else if (strncmp(line, "Anonymous:", 10) == 0) {
            anonymous = strtol(line + 10, NULL, 10);
        } else if (strncmp(line, "Locked:", 7) == 0) {
            locked = strtol(line + 7, NULL, 10);
        } else if (strncmp(line, "VmFlags:", 8) == 0) {
            /* No private copy (Anonymous 0): every page is the file's, and comes back from it. */
            if (candidate && anonymous == 0 && locked == 0
                && madvise((void *)start, end - start, MADV_DONTNEED) == 0) released += (long)(end - start);
            candidate = 0;
        }
    }
    fclose(smaps);
    return released;
}

int binder_rename_exchange(const char *first, const char *second) {
    return (int)syscall(SYS_renameat2, AT_FDCWD, first, AT_FDCWD, second, 2 /* RENAME_EXCHANGE */);
}
