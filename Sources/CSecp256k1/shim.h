#ifndef BINDER_CSECP256K1_SHIM_H
#define BINDER_CSECP256K1_SHIM_H
#include <secp256k1.h>
#include <secp256k1_ecdh.h>
#include <secp256k1_extrakeys.h>
#include <secp256k1_schnorrsig.h>
#include <string.h>

/* ECDH "hash" that returns the shared point's x-coordinate unhashed, as NIP-44 requires. */
static inline int binder_ecdh_copy_x(unsigned char *output, const unsigned char *x32,
                                     const unsigned char *y32, void *data) {
    (void)y32; (void)data;
    memcpy(output, x32, 32);
    return 1;
}

static inline int binder_ecdh_xonly(const secp256k1_context *ctx, unsigned char *out32,
                                    const secp256k1_pubkey *pub, const unsigned char *seckey) {
    return secp256k1_ecdh(ctx, out32, pub, seckey, binder_ecdh_copy_x, NULL);
}

static inline unsigned int binder_secp_context_sign_verify(void) {
    return SECP256K1_CONTEXT_NONE;
}
#endif
