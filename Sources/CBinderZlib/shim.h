#ifndef BINDER_CZLIB_SHIM_H
#define BINDER_CZLIB_SHIM_H
/* zlib, for the packs BinderGit writes itself (PackWriter, FoldCopy) and the loose objects it
 * checks (LooseObjects): the CRC-32 a pack
 * index keeps per object, and the fast deflate of a save's blobs and a fold's trees and
 * deltas. (The Adler-32 that ends a stored zlib stream is BinderGit's own; zlib's is its
 * test oracle.) */
#include <zlib.h>

/* deflateInit2 is a macro (it passes zlib's version and z_stream's size). A stream for
 * ciphertext: the fastest level, a 32 KB window, Huffman coding only (no string matching). */
static inline int binder_deflate_init_huffman(z_streamp stream) {
    return deflateInit2(stream, Z_BEST_SPEED, Z_DEFLATED, 15, 8, Z_HUFFMAN_ONLY);
}

/* inflateInit is a macro too. For the loose objects checked before libgit2 reads them. */
static inline int binder_inflate_init(z_streamp stream) {
    return inflateInit(stream);
}
#endif
