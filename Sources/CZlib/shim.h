#ifndef BINDER_CZLIB_SHIM_H
#define BINDER_CZLIB_SHIM_H
/* zlib, for the two checksums of a pack BinderGit writes itself (PackWriter): the CRC-32 a
 * pack index keeps per object and the Adler-32 that ends each stored zlib stream. */
#include <zlib.h>
#endif
