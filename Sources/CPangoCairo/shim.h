#ifndef BINDER_CPANGOCAIRO_SHIM_H
#define BINDER_CPANGOCAIRO_SHIM_H
#include <pango/pangocairo.h>
#include <cairo.h>
#include <cairo-pdf.h>
#include <stdio.h>
#include <stdlib.h>
#include <setjmp.h>
#include <jpeglib.h>

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
static inline cairo_surface_t *binder_jpeg_surface(const unsigned char *data, unsigned long length) {
    struct jpeg_decompress_struct info;
    struct binder_jpeg_error error;
    cairo_surface_t *volatile surface = NULL;
    info.err = jpeg_std_error(&error.base);
    error.base.error_exit = binder_jpeg_error_exit;
    error.base.output_message = binder_jpeg_no_message;
    if (setjmp(error.jump)) {
        jpeg_destroy_decompress(&info);
        if (surface) cairo_surface_destroy(surface);
        return NULL;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, data, length);
    jpeg_read_header(&info, TRUE);
    /* Cairo's RGB24 is a native-endian 32-bit 0x00RRGGBB: libjpeg-turbo writes it directly. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    info.out_color_space = JCS_EXT_BGRX;
#else
    info.out_color_space = JCS_EXT_XRGB;
#endif
    jpeg_start_decompress(&info);
    if (info.output_width == 0 || info.output_height == 0 || info.output_width > BINDER_JPEG_MAX_SIDE
        || info.output_height > BINDER_JPEG_MAX_SIDE
        || (long)info.output_width * (long)info.output_height > BINDER_JPEG_MAX_PIXELS) {
        jpeg_destroy_decompress(&info);
        return NULL;
    }
    surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)info.output_width, (int)info.output_height);
    if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
        jpeg_destroy_decompress(&info);
        cairo_surface_destroy(surface);
        return NULL;
    }
    cairo_surface_flush(surface);
    unsigned char *pixels = cairo_image_surface_get_data(surface);
    int stride = cairo_image_surface_get_stride(surface);
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = pixels + (size_t)info.output_scanline * (size_t)stride;
        jpeg_read_scanlines(&info, &row, 1);
    }
    jpeg_finish_decompress(&info);
    jpeg_destroy_decompress(&info);
    cairo_surface_mark_dirty(surface);
    return surface;
}

#endif
