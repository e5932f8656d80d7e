/*
 * Sources/CPangoCairo/shim.h and popplershim.h declare the Pango, poppler-glib and GLib
 * functions they use themselves (their headers need pkg-config's include paths). Compiled by
 * scripts/test after Pango's and poppler-glib's own headers: a declaration or value there that
 * does not match them fails this compile.
 */
#include <stddef.h>
#include <pango/pangocairo.h>
#include <poppler.h>
#include "../../Sources/CPangoCairo/shim.h"
#include "../../Sources/CPangoCairo/popplershim.h"

_Static_assert(BINDER_PANGO_SCALE == PANGO_SCALE, "PANGO_SCALE");
_Static_assert(BINDER_PANGO_WRAP_WORD_CHAR == PANGO_WRAP_WORD_CHAR, "PANGO_WRAP_WORD_CHAR");
_Static_assert(BINDER_PANGO_ELLIPSIZE_END == PANGO_ELLIPSIZE_END, "PANGO_ELLIPSIZE_END");
_Static_assert(sizeof(PangoWrapMode) == sizeof(unsigned int) && sizeof(PangoEllipsizeMode) == sizeof(unsigned int),
               "the enums are passed as the unsigned int shim.h declares without Pango's headers");
_Static_assert(sizeof(PangoRectangle) == 4 * sizeof(int) && offsetof(PangoRectangle, x) == 0
               && offsetof(PangoRectangle, y) == sizeof(int) && offsetof(PangoRectangle, width) == 2 * sizeof(int)
               && offsetof(PangoRectangle, height) == 3 * sizeof(int), "PangoRectangle as shim.h lays it out");

_Static_assert(BINDER_POPPLER_ERROR_ENCRYPTED == POPPLER_ERROR_ENCRYPTED, "POPPLER_ERROR_ENCRYPTED");

int main(void) { return 0; }
