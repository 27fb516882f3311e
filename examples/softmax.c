/*
 * softmax.c — capture a softmax with kiln, compile it, run it, print what was captured.
 *
 * The whole flow of kiln in one file:
 *   1. make a capture device;
 *   2. open a scope on it and record tensor operations (nothing runs yet);
 *   3. end the scope: the recorded graph is checked and compiled into a program;
 *   4. run the program on your own buffers, as often as you like.
 *
 * Build against an installed kiln:  cc softmax.c -o softmax $(pkg-config --cflags --libs kiln) -lm
 */
#include <math.h>
#include <stdio.h>

#include <kiln.h>

enum {
    ROWS = 4,
    COLS = 8
};

/* softmax over the last axis: exp(x - max) / sum(exp(x - max)), row by row.  Subtracting
 * the row's max first keeps exp from overflowing; it does not change the result. */
static kiln_tensor
softmax(kiln_tensor x)
{
    const int last = -1;                               /* negative axes count from the end */
    kiln_tensor max = kiln_reduce_max(x, 1, &last, 1); /* [ROWS,1]: keepdim for broadcasting */
    kiln_tensor e = kiln_exp(kiln_sub(x, max));
    kiln_tensor sum = kiln_reduce_sum(e, 1, &last, 1);
    return kiln_div(e, sum);
}

int
main(void)
{
    kiln_device *dev = kiln_device_new();
    if (!dev) {
        fprintf(stderr, "softmax: %s\n", kiln_errmsg());
        return 1;
    }

    /* Record.  Every tensor call must happen inside a scope: outside one, kiln refuses
     * with KILN_ERR_OUTSIDE_SCOPE.  Errors inside a scope are sticky, so the calls can be
     * nested freely and checked once, at kiln_scope_end. */
    kiln_scope scope = kiln_scope_begin(dev);
    if (kiln_scope_is_null(scope)) {
        fprintf(stderr, "softmax: %s\n", kiln_errmsg());
        kiln_device_free(dev);
        return 1;
    }
    const int64_t dims[2] = {ROWS, COLS};
    kiln_tensor x = kiln_input(dev, "x", KILN_DTYPE_F32, 2, dims);
    kiln_tensor y = softmax(x);

    /* End the scope: outputs are named, the graph is verified and compiled.  The device
     * is free again whatever the outcome. */
    const char *names[1] = {"y"};
    kiln_options options = KILN_OPTIONS_INIT;
    options.output_names = names;
    options.graph_name = "softmax";
    kiln_program *program = NULL;
    if (kiln_scope_end(scope, 1, &y, &options, &program) != KILN_OK) {
        fprintf(stderr, "softmax: %s\n", kiln_errmsg());
        kiln_device_free(dev);
        return 1;
    }

    /* Run on host buffers: row-major, contiguous, inputs in declaration order. */
    float in[ROWS * COLS], out[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        in[i] = (float)((i * 7) % 11) * 0.5f - 2.0f + (float)(i / COLS); /* any numbers */
    const void *inputs[1] = {in};
    void *outputs[1] = {out};
    int status = 0;
    if (kiln_program_run(program, inputs, outputs) != KILN_OK) {
        fprintf(stderr, "softmax: %s\n", kiln_errmsg());
        status = 1;
    }

    /* Check: every row of a softmax is positive and sums to 1. */
    for (int r = 0; r < ROWS && status == 0; r++) {
        double sum = 0;
        for (int c = 0; c < COLS; c++) {
            float v = out[r * COLS + c];
            if (!(v > 0.0f)) {
                fprintf(stderr, "softmax: y[%d][%d] = %g is not positive\n", r, c, v);
                status = 1;
            }
            sum += v;
        }
        if (fabs(sum - 1.0) > 1e-6) {
            fprintf(stderr, "softmax: row %d sums to %.9g, not 1\n", r, sum);
            status = 1;
        }
    }

    /* Show what was captured (the text format: `kiln dump` and `kiln run` read it back)
     * and a few results. */
    printf("captured graph:\n");
    kiln_graph_print(kiln_program_graph(program), stdout);
    if (status == 0) {
        printf("\nrow 0:");
        for (int c = 0; c < COLS; c++)
            printf(" %.4f", out[c]);
        printf("\nrow %d:", ROWS - 1);
        for (int c = 0; c < COLS; c++)
            printf(" %.4f", out[(ROWS - 1) * COLS + c]);
        printf("\nevery row sums to 1: ok\n");
    }

    kiln_program_free(program);
    kiln_device_free(dev);
    return status;
}
