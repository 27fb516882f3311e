/* placeholder until the interpreter lands */
#include "ir.h"
kiln_status ir_interpret(const kiln_graph *g, const void *const *inputs, void *const *outputs) { (void)g; (void)inputs; (void)outputs; return ir_error(KILN_ERR_UNSUPPORTED, "not yet"); }
