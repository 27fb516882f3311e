/* placeholder until the parser lands */
#include "ir.h"
kiln_status ir_parse(const char *text, size_t len, const char *srcname, kiln_graph **out) { (void)text; (void)len; (void)srcname; (void)out; return ir_error(KILN_ERR_UNSUPPORTED, "not yet"); }
