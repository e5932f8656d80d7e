#ifndef BINDER_CCRYPTO_SHIM_H
#define BINDER_CCRYPTO_SHIM_H
// OpenSSL's libcrypto, for SHA-256, SHA-1 (a git pack's checksums) and Poly1305 only: it uses the CPU's SHA extensions (SHA-NI)
// and AVX2, several times fewer cycles than libsodium's portable SHA-256 (which dominated
// NIP-44's cost: the MAC over the whole payload) and its SSE2 Poly1305 (a sidecar's tag).
// The one-shot SHA256_* calls are deprecated in OpenSSL 3 in favour of EVP, whose per-call
// lookup costs more than hashing a small document's key derivation.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/sha.h>
#include <openssl/evp.h>
#endif
