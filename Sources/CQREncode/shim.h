#ifndef BINDER_CQRENCODE_SHIM_H
#define BINDER_CQRENCODE_SHIM_H
/*
 * libqrencode, opened with dlopen when a share's QR code is drawn (`binder share`), not
 * linked: every other command, and the mount daemon, neither loads nor maps it. Swift calls
 * it through `struct binder_qrencode`, filled by BinderSystem's SharedLibrarySymbols from
 * libqrencode.so.4.
 */
#include <qrencode.h>

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wnullability-completeness"

/* Every function used. */
#define BINDER_QRENCODE_FUNCTIONS(X) X(QRcode_encodeString8bit) X(QRcode_free)

/* The entry points, each typed as qrencode.h declares it. */
struct binder_qrencode {
#define BINDER_ENTRY(name) __typeof__(name) *_Nonnull name;
    BINDER_QRENCODE_FUNCTIONS(BINDER_ENTRY)
#undef BINDER_ENTRY
};

/* The names of the entry points, in the struct's order (BinderSystem's SharedLibrarySymbols
 * resolves them with dlsym into a `struct binder_qrencode`), and how many there are. */
static inline const char *_Nonnull const *_Nonnull binder_qrencode_names(unsigned long *_Nonnull count) {
#define BINDER_NAME(name) #name,
    static const char *const names[] = {BINDER_QRENCODE_FUNCTIONS(BINDER_NAME)};
#undef BINDER_NAME
    *count = sizeof names / sizeof *names;
    return names;
}

#pragma clang diagnostic pop
#endif
