#ifndef BINDER_CZBAR_SHIM_H
#define BINDER_CZBAR_SHIM_H
/*
 * libzbar, opened with dlopen when a picture of a share is read (`binder open-share --qr`), not
 * linked: every other command, and the mount daemon, neither loads nor maps it and what it
 * brings (D-Bus, video4linux, ImageMagick's readers…). Swift calls it through
 * `struct binder_zbar`, filled by BinderSystem's SharedLibrarySymbols from libzbar.so.0.
 */
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

/* The names of the entry points, in the struct's order (BinderSystem's SharedLibrarySymbols
 * resolves them with dlsym into a `struct binder_zbar`), and how many there are. */
static inline const char *_Nonnull const *_Nonnull binder_zbar_names(unsigned long *_Nonnull count) {
#define BINDER_NAME(name) #name,
    static const char *const names[] = {BINDER_ZBAR_FUNCTIONS(BINDER_NAME)};
#undef BINDER_NAME
    *count = sizeof names / sizeof *names;
    return names;
}

#pragma clang diagnostic pop
#endif
