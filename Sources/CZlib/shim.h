#ifndef BINDER_CZLIB_SHIM_H
#define BINDER_CZLIB_SHIM_H
/* zlib, for the packs BinderGit writes itself (PackWriter, FoldCopy): the CRC-32 a pack
 * index keeps per object, and the fast deflate of a save's blobs and a fold's trees and
 * deltas. (The Adler-32 that ends a stored zlib stream is BinderGit's own; zlib's is its
 * test oracle.) */
#include <zlib.h>
#endif
