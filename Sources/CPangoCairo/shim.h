#ifndef BINDER_CPANGOCAIRO_SHIM_H
#define BINDER_CPANGOCAIRO_SHIM_H
/*
 * Pango, Cairo and libjpeg for the PDF export and for reading pictures, opened with dlopen at
 * their first use rather than linked: a process that never draws (the mount daemon, and every
 * command but `export` and the sharing ones) then neither loads nor maps them and the
 * libraries they bring (X11, fontconfig, harfbuzz…; with libzbar's and libqrencode's, 34 of the
 * 73 the binary mapped): 60 ms of a cold start and 5.5 MB of the daemon's memory
 * (docs/BENCHMARKS.md). Swift calls them through `struct binder_pangocairo`, filled by BinderSystem's
 * SharedLibrarySymbols.
 *
 * Cairo's and libjpeg's own headers are included as they are. Pango's and GLib's need include
 * paths only pkg-config knows, and pkg-config would link the libraries too, so the few
 * declarations used are written here. scripts/test compiles this header after the real
 * ones (Tests/CShims/pangocairo-declarations.c): a declaration here that does not match
 * them fails that compile.
 */
#include <cairo/cairo.h>
#include <cairo/cairo-pdf.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wnullability-completeness"

#ifndef __PANGOCAIRO_H__  /* (the check includes Pango's own headers first: theirs are used) */
typedef int gboolean;
typedef unsigned int gunichar;
typedef void *gpointer;
typedef struct _GError GError;
typedef struct _PangoContext PangoContext;
typedef struct _PangoLayout PangoLayout;
typedef struct _PangoLayoutLine PangoLayoutLine;
typedef struct _PangoLayoutIter PangoLayoutIter;
typedef struct _PangoFontDescription PangoFontDescription;
typedef struct _PangoAttrList PangoAttrList;
typedef struct _PangoRectangle PangoRectangle;
struct _PangoRectangle { int x; int y; int width; int height; };
typedef unsigned int PangoWrapMode;       /* enums in Pango's headers, of the same size */
typedef unsigned int PangoEllipsizeMode;
#endif

/* Pango's values used (checked against Pango's headers with the declarations). */
#define BINDER_PANGO_SCALE 1024
#define BINDER_PANGO_WRAP_WORD_CHAR 2
#define BINDER_PANGO_ELLIPSIZE_END 3

void g_free(gpointer mem);
void g_object_unref(gpointer object);
void pango_attr_list_unref(PangoAttrList *list);
void pango_cairo_context_set_resolution(PangoContext *context, double dpi);
PangoContext *pango_cairo_create_context(cairo_t *cr);
void pango_cairo_show_layout(cairo_t *cr, PangoLayout *layout);
void pango_cairo_show_layout_line(cairo_t *cr, PangoLayoutLine *line);
void pango_font_description_free(PangoFontDescription *desc);
PangoFontDescription *pango_font_description_from_string(const char *str);
PangoLayoutIter *pango_layout_get_iter(PangoLayout *layout);
void pango_layout_get_size(PangoLayout *layout, int *width, int *height);
void pango_layout_iter_free(PangoLayoutIter *iter);
int pango_layout_iter_get_baseline(PangoLayoutIter *iter);
void pango_layout_iter_get_line_extents(PangoLayoutIter *iter, PangoRectangle *ink_rect, PangoRectangle *logical_rect);
PangoLayoutLine *pango_layout_iter_get_line_readonly(PangoLayoutIter *iter);
gboolean pango_layout_iter_next_line(PangoLayoutIter *iter);
PangoLayout *pango_layout_new(PangoContext *context);
void pango_layout_set_attributes(PangoLayout *layout, PangoAttrList *attrs);
void pango_layout_set_ellipsize(PangoLayout *layout, PangoEllipsizeMode ellipsize);
void pango_layout_set_font_description(PangoLayout *layout, const PangoFontDescription *desc);
void pango_layout_set_text(PangoLayout *layout, const char *text, int length);
void pango_layout_set_width(PangoLayout *layout, int width);
void pango_layout_set_wrap(PangoLayout *layout, PangoWrapMode wrap);
gboolean pango_parse_markup(const char *markup_text, int length, gunichar accel_marker, PangoAttrList **attr_list,
                            char **text, gunichar *accel_char, GError **error);

/* Every function used, found in libpangocairo (Pango, Cairo and GLib are among its dependencies). */
#define BINDER_PANGOCAIRO_FUNCTIONS(X) \
    X(cairo_create) X(cairo_destroy) X(cairo_fill) X(cairo_get_source) X(cairo_image_surface_create) \
    X(cairo_image_surface_create_from_png_stream) X(cairo_image_surface_get_data) X(cairo_image_surface_get_format) \
    X(cairo_image_surface_get_height) X(cairo_image_surface_get_stride) X(cairo_image_surface_get_width) \
    X(cairo_line_to) X(cairo_move_to) X(cairo_paint) X(cairo_pattern_set_filter) X(cairo_pdf_surface_add_outline) \
    X(cairo_pdf_surface_create_for_stream) X(cairo_pdf_surface_set_metadata) X(cairo_rectangle) X(cairo_restore) \
    X(cairo_save) X(cairo_scale) X(cairo_set_antialias) X(cairo_set_line_width) X(cairo_set_source_rgb) \
    X(cairo_set_source_surface) X(cairo_show_page) X(cairo_status) X(cairo_status_to_string) X(cairo_stroke) \
    X(cairo_surface_destroy) X(cairo_surface_finish) X(cairo_surface_flush) X(cairo_surface_mark_dirty) \
    X(cairo_surface_set_mime_data) X(cairo_surface_status) X(cairo_surface_write_to_png_stream) X(cairo_tag_begin) \
    X(cairo_tag_end) X(cairo_translate) \
    X(g_free) X(g_object_unref) \
    X(pango_attr_list_unref) X(pango_cairo_context_set_resolution) X(pango_cairo_create_context) \
    X(pango_cairo_show_layout) X(pango_cairo_show_layout_line) X(pango_font_description_free) \
    X(pango_font_description_from_string) X(pango_layout_get_iter) X(pango_layout_get_size) X(pango_layout_iter_free) \
    X(pango_layout_iter_get_baseline) X(pango_layout_iter_get_line_extents) X(pango_layout_iter_get_line_readonly) \
    X(pango_layout_iter_next_line) X(pango_layout_new) X(pango_layout_set_attributes) X(pango_layout_set_ellipsize) \
    X(pango_layout_set_font_description) X(pango_layout_set_text) X(pango_layout_set_width) X(pango_layout_set_wrap) \
    X(pango_parse_markup)

/* Every libjpeg function used (jpeg_create_decompress is a macro for jpeg_CreateDecompress). */
#define BINDER_JPEG_FUNCTIONS(X) \
    X(jpeg_std_error) X(jpeg_CreateDecompress) X(jpeg_mem_src) X(jpeg_read_header) X(jpeg_start_decompress) \
    X(jpeg_read_scanlines) X(jpeg_finish_decompress) X(jpeg_destroy_decompress)

/* The entry points, each typed as its declaration is. */
struct binder_pangocairo {
#define BINDER_ENTRY(name) __typeof__(name) *_Nonnull name;
    BINDER_PANGOCAIRO_FUNCTIONS(BINDER_ENTRY)
    BINDER_JPEG_FUNCTIONS(BINDER_ENTRY)
#undef BINDER_ENTRY
};

#define BINDER_PANGOCAIRO_STRING(x) #x
#define BINDER_PANGOCAIRO_SONAME(prefix, version) prefix BINDER_PANGOCAIRO_STRING(version)

/*
 * The files opened: libpangocairo (Pango, Cairo and GLib among its dependencies), then libjpeg,
 * the one this header was written for (its library version names its file: libjpeg.so.62).
 * They stay loaded for the life of the process (GLib's types cannot be unloaded).
 */
static inline const char *_Nonnull binder_pangocairo_file(void) { return "libpangocairo-1.0.so.0"; }
static inline const char *_Nonnull binder_jpeg_file(void) {
    return BINDER_PANGOCAIRO_SONAME("libjpeg.so.", JPEG_LIB_VERSION);
}

/* The names of the entry points in each file, in the struct's order (BinderSystem's
 * SharedLibrarySymbols resolves them with dlsym into a `struct binder_pangocairo`). */
#define BINDER_NAME(name) #name,
static inline const char *_Nonnull const *_Nonnull binder_pangocairo_names(unsigned long *_Nonnull count) {
    static const char *const names[] = {BINDER_PANGOCAIRO_FUNCTIONS(BINDER_NAME)};
    *count = sizeof names / sizeof *names;
    return names;
}
static inline const char *_Nonnull const *_Nonnull binder_jpeg_names(unsigned long *_Nonnull count) {
    static const char *const names[] = {BINDER_JPEG_FUNCTIONS(BINDER_NAME)};
    *count = sizeof names / sizeof *names;
    return names;
}
#undef BINDER_NAME

/*
 * libjpeg reports errors by calling error_exit, which must not return: the
 * decoder below jumps back with longjmp, which Swift cannot do, so decoding is
 * one C function. Messages (warnings about odd files) are dropped.
 */
struct binder_jpeg_error {
    struct jpeg_error_mgr base;
    jmp_buf jump;
};

static inline void binder_jpeg_error_exit(j_common_ptr info) {
    longjmp(((struct binder_jpeg_error *)info->err)->jump, 1);
}

static inline void binder_jpeg_no_message(j_common_ptr info) { (void)info; }

/* Largest side and area decoded: a hostile header cannot make us allocate more. */
#define BINDER_JPEG_MAX_SIDE 20000
#define BINDER_JPEG_MAX_PIXELS (80L * 1000 * 1000)

/*
 * Decodes a JPEG held in memory into a new Cairo RGB24 image surface (owned by
 * the caller: cairo_surface_destroy), or NULL when the bytes are not a JPEG
 * libjpeg can decode to RGB (CMYK, truncated, too large).
 */
static inline cairo_surface_t *binder_jpeg_surface(const struct binder_pangocairo *c, const unsigned char *data,
                                                   unsigned long length) {
    struct jpeg_decompress_struct info;
    struct binder_jpeg_error error;
    cairo_surface_t *volatile surface = NULL;
    info.err = c->jpeg_std_error(&error.base);
    error.base.error_exit = binder_jpeg_error_exit;
    error.base.output_message = binder_jpeg_no_message;
    if (setjmp(error.jump)) {
        c->jpeg_destroy_decompress(&info);
        if (surface) c->cairo_surface_destroy(surface);
        return NULL;
    }
    c->jpeg_CreateDecompress(&info, JPEG_LIB_VERSION, sizeof(struct jpeg_decompress_struct));
    c->jpeg_mem_src(&info, data, length);
    c->jpeg_read_header(&info, TRUE);
    /* Cairo's RGB24 is a native-endian 32-bit 0x00RRGGBB: libjpeg-turbo writes it directly. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    info.out_color_space = JCS_EXT_BGRX;
#else
    info.out_color_space = JCS_EXT_XRGB;
#endif
    c->jpeg_start_decompress(&info);
    if (info.output_width == 0 || info.output_height == 0 || info.output_width > BINDER_JPEG_MAX_SIDE
        || info.output_height > BINDER_JPEG_MAX_SIDE
        || (long)info.output_width * (long)info.output_height > BINDER_JPEG_MAX_PIXELS) {
        c->jpeg_destroy_decompress(&info);
        return NULL;
    }
    surface = c->cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)info.output_width, (int)info.output_height);
    if (c->cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
        c->jpeg_destroy_decompress(&info);
        c->cairo_surface_destroy(surface);
        return NULL;
    }
    c->cairo_surface_flush(surface);
    unsigned char *pixels = c->cairo_image_surface_get_data(surface);
    int stride = c->cairo_image_surface_get_stride(surface);
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = pixels + (size_t)info.output_scanline * (size_t)stride;
        c->jpeg_read_scanlines(&info, &row, 1);
    }
    c->jpeg_finish_decompress(&info);
    c->jpeg_destroy_decompress(&info);
    c->cairo_surface_mark_dirty(surface);
    return surface;
}

#pragma clang diagnostic pop
#endif
