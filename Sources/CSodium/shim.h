#ifndef BINDER_CSODIUM_SHIM_H
#define BINDER_CSODIUM_SHIM_H
#include <sodium.h>
#endif
