/* placeholder until the printer lands */
#include "ir.h"
int ir_print_scalar(char *buf, size_t n, kiln_dtype t, const void *elem) { (void)t; (void)elem; if (n) buf[0] = 0; return 0; }
kiln_status ir_graph_print(const kiln_graph *g, FILE *f) { (void)g; (void)f; return ir_error(KILN_ERR_UNSUPPORTED, "not yet"); }
kiln_status ir_graph_print_dot(const kiln_graph *g, FILE *f) { (void)g; (void)f; return ir_error(KILN_ERR_UNSUPPORTED, "not yet"); }
