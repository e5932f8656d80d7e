#ifndef BINDER_CLINUX_H
#define BINDER_CLINUX_H
/* Variadic and syscall-only Linux interfaces (keyctl, prctl, pipe2, posix_spawn extensions),
   wrapped as plain functions in shim.c. */
#include <spawn.h>
#include <stddef.h>
#include <stdint.h>

int binder_set_nondumpable(void);
/* mallopt(M_MMAP_THRESHOLD) and mallopt(M_ARENA_MAX) (mallopt's constants are macros); 0 when
   both were taken, -1 otherwise. */
int binder_malloc_tune(int mmap_threshold, int arena_max);
/* The bytes the C allocator has handed out and not had back (mallinfo2's uordblks, without its
   struct): for tests and measurements of what a part of the program keeps. */
size_t binder_heap_bytes_in_use(void);
/* Drops from this process's page tables the pages of its code (private, executable mappings
   of files that hold no private copy): they stay in the page cache, and come back at the next
   touch. The bytes of the mappings so released, or -1 when /proc/self/smaps cannot be read. */
long binder_release_code_pages(void);
/* The file system type (statfs f_type: TMPFS_MAGIC, RAMFS_MAGIC…) of the one holding path; -1 and errno on failure. */
long binder_fs_type(const char *path);
int binder_pipe_cloexec(int fds[2]);
/* renameat2(RENAME_EXCHANGE) of two paths relative to the working folder: 0, or -1 and errno
   (EINVAL where the file system cannot exchange). */
int binder_rename_exchange(const char *first, const char *second);
short binder_posix_spawn_setsid(void);
int binder_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);
/* Runs path (searched on PATH) with argv and envp as git runs an editor: in the caller's
   process group (the terminal's foreground group when the caller is in it, so the program may
   read and write the terminal), with the default actions of SIGINT and SIGQUIT and an empty
   signal mask, descriptors from 3 up closed. Meanwhile the caller ignores SIGINT and SIGQUIT
   (the terminal sends them to the whole group: the program decides what Ctrl-C means), and
   gets its own actions back once the program has exited. Returns its wait status, or -1 with
   errno when it could not be started or waited for. */
int binder_run_in_foreground(const char *path, char *const argv[], char *const envp[]);
int binder_is_dumpable(void);
long binder_add_key(const char *type, const char *description, const void *payload,
                                  size_t plen, int32_t keyring);
long binder_request_key(const char *type, const char *description, int32_t keyring);
long binder_keyctl_read(int32_t key, void *buffer, size_t buflen);
long binder_keyctl_set_timeout(int32_t key, unsigned int seconds);
long binder_keyctl_revoke(int32_t key);
long binder_keyctl_unlink(int32_t key, int32_t keyring);
long binder_keyctl_get_keyring_id(int32_t keyring, int create);
long binder_keyctl_setperm(int32_t key, uint32_t perm);
int32_t binder_key_spec_user_keyring(void);
int32_t binder_key_spec_session_keyring(void);

/* Unix-domain stream sockets (sockaddr_un is awkward from Swift). Each returns a descriptor
   (close-on-exec) or -1 with errno set; a path too long for sun_path gives ENAMETOOLONG. */
int binder_unix_listen(const char *path, int backlog);
int binder_unix_connect(const char *path);
int binder_unix_accept(int listener);
/* The uid of the process at the other end of a connected unix socket (SO_PEERCRED). */
int binder_peer_uid(int fd, uint32_t *uid);

#endif
