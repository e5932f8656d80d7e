#ifndef BINDER_CCRYPTO_SHIM_H
#define BINDER_CCRYPTO_SHIM_H
// OpenSSL's libcrypto, for SHA-256 only: it uses the CPU's SHA extensions (SHA-NI), about ten
// times fewer cycles than libsodium's portable SHA-256, which dominated NIP-44's cost (the MAC
// over the whole payload). The one-shot SHA256_* calls are deprecated in OpenSSL 3 in favour of
// EVP, whose per-call lookup costs more than hashing a small document's key derivation.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/sha.h>
#endif
