#ifndef BINDER_CZBAR_SHIM_H
#define BINDER_CZBAR_SHIM_H
#include <zbar.h>

/* zbar_fourcc is a macro: the format code of 8-bit grayscale ("Y800"), as a function. */
static inline unsigned long binder_zbar_format_y800(void) { return zbar_fourcc('Y', '8', '0', '0'); }

#endif
