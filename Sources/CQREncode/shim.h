#ifndef BINDER_CQRENCODE_SHIM_H
#define BINDER_CQRENCODE_SHIM_H
/*
 * libqrencode, opened with dlopen when a share's QR code is drawn (`binder share`), not
 * linked: every other command, and the mount daemon, neither loads nor maps it. Swift calls
 * it through `struct binder_qrencode`.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <qrencode.h>

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wnullability-completeness"

/* The entry points used, each typed as qrencode.h declares it. */
struct binder_qrencode {
    __typeof__(QRcode_encodeString8bit) *_Nonnull QRcode_encodeString8bit;
    __typeof__(QRcode_free) *_Nonnull QRcode_free;
};

/*
 * Opens libqrencode and fills `*entries`: NULL when both entry points were found, else why not
 * (dlerror's text, valid until the thread's next dl call). It stays loaded for the life of
 * the process.
 */
static inline const char *binder_qrencode_open(struct binder_qrencode *entries) {
    void *library = dlopen("libqrencode.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library) return dlerror();
    entries->QRcode_encodeString8bit = (__typeof__(entries->QRcode_encodeString8bit))dlsym(library, "QRcode_encodeString8bit");
    entries->QRcode_free = (__typeof__(entries->QRcode_free))dlsym(library, "QRcode_free");
    if (!entries->QRcode_encodeString8bit || !entries->QRcode_free) {
        const char *why = dlerror();
        return why ? why : "QRcode_encodeString8bit or QRcode_free: not found";
    }
    return NULL;
}

/* A table to fill with binder_qrencode_open (Swift cannot make one: its entries are never null). */
static inline struct binder_qrencode *binder_qrencode_allocate(void) {
    return (struct binder_qrencode *)calloc(1, sizeof(struct binder_qrencode));
}

#pragma clang diagnostic pop
#endif
