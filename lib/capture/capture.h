/* capture.h — lib/capture's internal interface (devices, router, scopes, recording). */
#ifndef KILN_CAPTURE_H
#define KILN_CAPTURE_H
#include "ir.h"
#endif
