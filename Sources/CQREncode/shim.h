#ifndef BINDER_CQRENCODE_SHIM_H
#define BINDER_CQRENCODE_SHIM_H
#include <qrencode.h>
#endif
