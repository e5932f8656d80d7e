#ifndef BINDER_CPANGOCAIRO_POPPLER_SHIM_H
#define BINDER_CPANGOCAIRO_POPPLER_SHIM_H
/*
 * poppler-glib, the PDF renderer that draws a page onto a Cairo context: how `binder key import
 * --qr` and `binder import` read a QR code drawn in a PDF (as vectors or as any kind of
 * picture). Part of this module because its drawing is Cairo's (a page is rendered onto a
 * `cairo_t` of shim.h's library); opened with dlopen at the first PDF read, apart from Pango
 * and Cairo (`struct binder_poppler`, its own SharedLibrarySymbols): the export and every other
 * picture work without it installed.
 *
 * poppler-glib's and GLib's headers need include paths only pkg-config knows (as Pango's do),
 * so the few declarations used are written here; Tests/CShims/pangocairo-declarations.c
 * compiles them after the real headers.
 */
#include "shim.h"

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wnullability-completeness"

#ifndef __POPPLER_GLIB_H__
typedef struct _PopplerDocument PopplerDocument;
typedef struct _PopplerPage PopplerPage;
#endif
#ifndef __G_BYTES_H__
typedef struct _GBytes GBytes;
#endif
#ifndef __G_ERROR_H__
/* GLib's error: its fields are read (which error, and its message). */
struct _GError {
    unsigned int domain; /* GQuark */
    int code;
    char *message;
};
#endif

/* PopplerError's codes (checked against poppler.h with the declarations). */
#define BINDER_POPPLER_ERROR_ENCRYPTED 1

GBytes *g_bytes_new(const void *data, unsigned long size);
void g_bytes_unref(GBytes *bytes);
void g_error_free(GError *error);
unsigned int poppler_error_quark(void);
PopplerDocument *poppler_document_new_from_bytes(GBytes *bytes, const char *password, GError **error);
int poppler_document_get_n_pages(PopplerDocument *document);
PopplerPage *poppler_document_get_page(PopplerDocument *document, int index);
void poppler_page_get_size(PopplerPage *page, double *width, double *height);
void poppler_page_render(PopplerPage *page, cairo_t *cairo);

/* Every function used, found in libpoppler-glib (GLib's and GObject's among its dependencies). */
#define BINDER_POPPLER_FUNCTIONS(X) \
    X(g_bytes_new) X(g_bytes_unref) X(g_error_free) X(g_object_unref) X(poppler_error_quark) \
    X(poppler_document_new_from_bytes) X(poppler_document_get_n_pages) X(poppler_document_get_page) \
    X(poppler_page_get_size) X(poppler_page_render)

/* The entry points, each typed as its declaration is. */
struct binder_poppler {
#define BINDER_ENTRY(name) __typeof__(name) *_Nonnull name;
    BINDER_POPPLER_FUNCTIONS(BINDER_ENTRY)
#undef BINDER_ENTRY
};

/* The file opened (its soname: the ABI these declarations are for); it stays loaded. */
static inline const char *_Nonnull binder_poppler_file(void) { return "libpoppler-glib.so.8"; }

/* The names of the entry points, in the struct's order (for SharedLibrarySymbols). */
static inline const char *_Nonnull const *_Nonnull binder_poppler_names(unsigned long *_Nonnull count) {
#define BINDER_NAME(name) #name,
    static const char *const names[] = {BINDER_POPPLER_FUNCTIONS(BINDER_NAME)};
#undef BINDER_NAME
    *count = sizeof names / sizeof *names;
    return names;
}

#pragma clang diagnostic pop
#endif
