/* placeholder: the capture module lands with the capture issue */
#include "capture.h"
typedef int cap_placeholder_;
