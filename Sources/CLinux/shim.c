/* Variadic and syscall-only Linux interfaces, which Swift cannot call directly. Compiled here,
   with _GNU_SOURCE, so that no Swift-visible header changes glibc's declarations (Clang modules
   reject a struct defined differently in two modules). */
#define _GNU_SOURCE
#include "clinux.h"
#include <fcntl.h>
#include <linux/keyctl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>


int binder_set_nondumpable(void) {
    struct rlimit none = {0, 0};
    int a = prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    int b = setrlimit(RLIMIT_CORE, &none);
    return (a == 0 && b == 0) ? 0 : -1;
}

int binder_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

short binder_posix_spawn_setsid(void) { return POSIX_SPAWN_SETSID; }

/* The daemon must not inherit the launcher's other descriptors (a caller waiting for EOF on a
   pipe would otherwise wait for the daemon's whole life). */
int binder_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
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
