#ifndef BINDER_CZBAR_SHIM_H
#define BINDER_CZBAR_SHIM_H
/*
 * libzbar, opened with dlopen when a picture of a share is read (`binder open-share --qr`), not
 * linked: every other command, and the mount daemon, neither loads nor maps it and what it
 * brings (D-Bus, video4linux, ImageMagick's readers…). Swift calls it through
 * `struct binder_zbar`.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <zbar.h>

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wnullability-completeness"

/* zbar_fourcc is a macro: the format code of 8-bit grayscale ("Y800"), as a function. */
static inline unsigned long binder_zbar_format_y800(void) { return zbar_fourcc('Y', '8', '0', '0'); }

/* Every function used. */
#define BINDER_ZBAR_FUNCTIONS(X) \
    X(zbar_image_create) X(zbar_image_destroy) X(zbar_image_first_symbol) X(zbar_image_scanner_create) \
    X(zbar_image_scanner_destroy) X(zbar_image_scanner_request_dbus) X(zbar_image_scanner_set_config) \
    X(zbar_image_set_data) X(zbar_image_set_format) X(zbar_image_set_size) X(zbar_scan_image) \
    X(zbar_symbol_get_data) X(zbar_symbol_get_data_length) X(zbar_symbol_get_type) X(zbar_symbol_next)

/* The entry points, each typed as zbar.h declares it. */
struct binder_zbar {
#define BINDER_ENTRY(name) __typeof__(name) *_Nonnull name;
    BINDER_ZBAR_FUNCTIONS(BINDER_ENTRY)
#undef BINDER_ENTRY
};

/*
 * Opens libzbar and fills `*entries`: NULL when every entry point was found, else why not
 * (dlerror's text, valid until the thread's next dl call). It stays loaded for the life of
 * the process.
 */
static inline const char *binder_zbar_open(struct binder_zbar *entries) {
    void *library = dlopen("libzbar.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!library) return dlerror();
#define BINDER_RESOLVE(name) \
    if (!(entries->name = (__typeof__(entries->name))dlsym(library, #name))) { \
        const char *why = dlerror(); \
        return why ? why : #name ": not found"; \
    }
    BINDER_ZBAR_FUNCTIONS(BINDER_RESOLVE)
#undef BINDER_RESOLVE
    return NULL;
}

/* A table to fill with binder_zbar_open (Swift cannot make one: its entries are never null). */
static inline struct binder_zbar *binder_zbar_allocate(void) {
    return (struct binder_zbar *)calloc(1, sizeof(struct binder_zbar));
}

#pragma clang diagnostic pop
#endif
