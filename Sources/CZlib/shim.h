#ifndef BINDER_CZLIB_SHIM_H
#define BINDER_CZLIB_SHIM_H
/* zlib, for the packs BinderGit writes itself (PackWriter, BlobPackCopy): the CRC-32 a pack
 * index keeps per object, the Adler-32 that ends each stored zlib stream, and the fast
 * deflate of a save's blobs. */
#include <zlib.h>
#endif
