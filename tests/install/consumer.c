/* consumer.c — a program outside kiln's tree, built against an installed kiln (shared or
 * static, through CMake's find_package or pkg-config): parse a small graph, interpret it,
 * and check the answer against arithmetic done here. */
#include <kiln.h>
#include <stdio.h>
#include <string.h>

static const char text[] = "graph axpy(a: f32[], x: f32[4], y: f32[4]) -> (out: f32[4]) {\n"
                           "  ax = mul(a, x)\n"
                           "  out = add(ax, y)\n"
                           "}\n";

int
main(void)
{
    if (strcmp(kiln_version(), KILN_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: header says kiln %s, library says %s\n", KILN_VERSION_STRING,
                kiln_version());
        return 1;
    }
    kiln_graph *g = NULL;
    if (kiln_graph_parse(text, strlen(text), &g) != KILN_OK) {
        fprintf(stderr, "consumer: %s\n", kiln_errmsg());
        return 1;
    }
    float a = 2.0f, x[4] = {1, 2, 3, 4}, y[4] = {0.5f, -1, 10, 0}, out[4] = {0};
    const void *in[3] = {&a, x, y};
    void *outs[1] = {out};
    int rc = 0;
    if (kiln_graph_interpret(g, in, outs) != KILN_OK) {
        fprintf(stderr, "consumer: %s\n", kiln_errmsg());
        rc = 1;
    }
    for (int i = 0; i < 4 && rc == 0; i++) {
        float want = a * x[i] + y[i]; /* small integers and halves: exact in f32 */
        if (out[i] != want) {
            fprintf(stderr, "consumer: out[%d] = %g, want %g\n", i, out[i], want);
            rc = 1;
        }
    }
    kiln_graph_free(g);
    /* Errors cross the library boundary too. */
    if (rc == 0 && (kiln_graph_parse("graph", 5, &g) != KILN_ERR_PARSE || g != NULL ||
                    kiln_errcode() != KILN_ERR_PARSE || kiln_errmsg()[0] == '\0')) {
        fprintf(stderr, "consumer: a bad graph was not a parse error\n");
        kiln_graph_free(g);
        rc = 1;
    }
    if (rc == 0)
        printf("consumer: ok (kiln %s): [%g, %g, %g, %g]\n", kiln_version(), out[0], out[1], out[2],
               out[3]);
    return rc;
}
