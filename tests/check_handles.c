/* check_handles.c — freed, reused, foreign and garbage pointer handles (kiln_device,
 * kiln_graph, kiln_program) are KILN_ERR_MISUSE, never a read of the memory they name.
 *
 * Under ASan (the ASan+UBSan build runs this suite) any read through a freed handle is a
 * heap-use-after-free report, and CK_FORK=no makes it fail the run; in a plain build the
 * "reused block" tests put a byte-for-byte copy of a live object where the freed one was,
 * which any check that looks at the object's contents would take for a live handle.
 *
 * Also: the live-handle set itself (ir_handle_set: growth, removal, out of memory), the
 * quarantine that keeps a stale pointer from naming a newer object, two threads freeing
 * one handle, and lock-free lookups while other threads grow the set. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "support.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif

#define F32 KILN_DTYPE_F32

static const char *const small_text = "graph g(x: f32[4]) -> (y: f32[4]) {\n"
                                      "  y = exp(x)\n"
                                      "}\n";

/* The thread's error is exactly `code` with exactly the message printf(fmt, ...). */
static void assert_exact(kiln_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
assert_exact(kiln_status code, const char *fmt, ...)
{
    char want[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    ck_assert_msg(kiln_errcode() == code, "expected %s, got %s: %s", kiln_status_str(code),
                  kiln_status_str(kiln_errcode()), kiln_errmsg());
    ck_assert_str_eq(kiln_errmsg(), want);
}

#define DEVICE_MSG "%s: invalid handle: not a live kiln_device (freed or foreign)"
#define GRAPH_MSG "%s: invalid handle: not a live kiln_graph (freed or foreign)"
#define PROGRAM_MSG "%s: invalid handle: not a live kiln_program (freed or foreign)"

static kiln_device *
device_new(void)
{
    kiln_device *d = kiln_device_new();
    ck_assert_msg(d != NULL, "kiln_device_new: %s", kiln_errmsg());
    return d;
}

static kiln_program *
program_new(kiln_mode mode)
{
    kiln_graph *g = ts_parse(small_text);
    kiln_options o = KILN_OPTIONS_INIT;
    o.mode = mode;
    kiln_program *p = NULL;
    ck_assert_msg(kiln_program_compile(g, &o, &p) == KILN_OK, "compile: %s", kiln_errmsg());
    kiln_graph_free(g);
    return p;
}

/* A live device still works: its id is what it was and a scope can begin and end on it. */
static void
assert_device_works(kiln_device *d, uint64_t id)
{
    ck_assert_uint_eq(kiln_device_id(d), id);
    kiln_scope s = kiln_scope_begin(d);
    ck_assert_msg(!kiln_scope_is_null(s), "kiln_scope_begin: %s", kiln_errmsg());
    ck_assert_int_eq(kiln_scope_abort(s), KILN_OK);
}

static void
assert_program_works(kiln_program *p)
{
    float x[4] = {0, 1, 2, 3}, y[4] = {0};
    const void *ins[1] = {x};
    void *outs[1] = {y};
    ck_assert_msg(kiln_program_run(p, ins, outs) == KILN_OK, "run: %s", kiln_errmsg());
    ck_assert(y[0] == 1.0f);
    ck_assert(kiln_program_graph(p) != NULL);
}

/* ---- every function that takes the handle, given a bad one ---------------------------- */

static kiln_status
cb_never(kiln_scope s, void *user)
{
    (void)s;
    *(int *)user = 1;
    return KILN_OK;
}

static void
assert_bad_device(kiln_device *d)
{
    int64_t n = 4;
    float data[4] = {0};
    int called = 0;
    kiln_program *p = (kiln_program *)&called;
    ck_assert_int_eq(kiln_device_free(d), KILN_ERR_MISUSE);
    assert_exact(KILN_ERR_MISUSE, DEVICE_MSG, "kiln_device_free");
    ck_assert_uint_eq(kiln_device_id(d), 0);
    assert_exact(KILN_ERR_MISUSE, DEVICE_MSG, "kiln_device_id");
    ck_assert(kiln_scope_is_null(kiln_scope_begin(d)));
    assert_exact(KILN_ERR_MISUSE, DEVICE_MSG, "kiln_scope_begin");
    ck_assert_int_eq(kiln_capture_scope(d, cb_never, &called, NULL, &p), KILN_ERR_MISUSE);
    assert_exact(KILN_ERR_MISUSE, DEVICE_MSG, "kiln_scope_begin");
    ck_assert(p == NULL && !called);
    ck_assert(kiln_tensor_is_null(kiln_input(d, "x", F32, 1, &n)));
    assert_exact(KILN_ERR_MISUSE, DEVICE_MSG, "kiln_input");
    ck_assert(kiln_tensor_is_null(kiln_constant(d, F32, 1, &n, data)));
    assert_exact(KILN_ERR_MISUSE, DEVICE_MSG, "kiln_constant");
    ck_assert(kiln_tensor_is_null(kiln_full(d, F32, 1, &n, 0)));
    assert_exact(KILN_ERR_MISUSE, DEVICE_MSG, "kiln_full");
    ck_assert(kiln_tensor_is_null(kiln_scalar(d, F32, 0)));
    assert_exact(KILN_ERR_MISUSE, DEVICE_MSG, "kiln_scalar");
    ck_assert(kiln_tensor_is_null(kiln_arange(d, F32, 4, 0, 1)));
    assert_exact(KILN_ERR_MISUSE, DEVICE_MSG, "kiln_arange");
}

static void
assert_bad_graph(kiln_graph *g, const kiln_graph *live)
{
    float x[4] = {0}, y[4];
    const void *ins[1] = {x};
    void *outs[1] = {y};
    kiln_value_info info = KILN_VALUE_INFO_INIT;
    kiln_graph_free(g);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_free");
    ck_assert_uint_eq(kiln_graph_hash(g), 0);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_hash");
    ck_assert_uint_eq(kiln_graph_generic_hash(g), 0);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_generic_hash");
    ck_assert_int_eq(kiln_graph_equal(g, live), 0);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_equal");
    ck_assert_int_eq(kiln_graph_equal(live, g), 0);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_equal");
    ck_assert(kiln_graph_name(g) == NULL);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_name");
    ck_assert_int_eq(kiln_graph_num_inputs(g), -1);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_num_inputs");
    ck_assert_int_eq(kiln_graph_num_outputs(g), -1);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_num_outputs");
    ck_assert_int_eq(kiln_graph_input(g, 0, &info), KILN_ERR_MISUSE);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_input");
    ck_assert_int_eq(kiln_graph_output(g, 0, &info), KILN_ERR_MISUSE);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_output");
    ck_assert_int_eq(kiln_graph_print(g, stderr), KILN_ERR_MISUSE);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_print");
    ck_assert_int_eq(kiln_graph_print_dot(g, stderr), KILN_ERR_MISUSE);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_print_dot");
    ck_assert(kiln_graph_to_string(g) == NULL);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_to_string");
    ck_assert_int_eq(kiln_graph_interpret(g, ins, outs), KILN_ERR_MISUSE);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_graph_interpret");
    kiln_program *p = (kiln_program *)&info;
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_ERR_MISUSE);
    assert_exact(KILN_ERR_MISUSE, GRAPH_MSG, "kiln_program_compile");
}

static void
assert_bad_program(kiln_program *p)
{
    float x[4] = {0}, y[4];
    const void *ins[1] = {x};
    void *outs[1] = {y};
    ck_assert_int_eq(kiln_program_run(p, ins, outs), KILN_ERR_MISUSE);
    assert_exact(KILN_ERR_MISUSE, PROGRAM_MSG, "kiln_program_run");
    kiln_program_free(p);
    assert_exact(KILN_ERR_MISUSE, PROGRAM_MSG, "kiln_program_free");
    ck_assert(kiln_program_graph(p) == NULL);
    assert_exact(KILN_ERR_MISUSE, PROGRAM_MSG, "kiln_program_graph");
    ck_assert_int_eq(kiln_program_mode(p), (kiln_mode)-1);
    assert_exact(KILN_ERR_MISUSE, PROGRAM_MSG, "kiln_program_mode");
    ck_assert_int_eq(kiln_program_dump(p, KILN_VIEW_GRAPH, stderr), KILN_ERR_MISUSE);
    assert_exact(KILN_ERR_MISUSE, PROGRAM_MSG, "kiln_program_dump");
}

/* ---- freed handles ------------------------------------------------------------------ */

START_TEST(test_freed_device)
{
    kiln_device *d = device_new();
    ck_assert_int_eq(kiln_device_free(d), KILN_OK);
    assert_bad_device(d);
    /* twice: the failed calls changed nothing */
    assert_bad_device(d);
}
END_TEST

START_TEST(test_freed_graph)
{
    kiln_graph *live = ts_parse(small_text);
    kiln_graph *g = ts_parse(small_text);
    kiln_graph_free(g);
    assert_bad_graph(g, live);
    assert_bad_graph(g, live);
    /* a graph a program owns dies with the program */
    kiln_program *p = program_new(KILN_MODE_INTERP);
    kiln_graph *pg = (kiln_graph *)kiln_program_graph(p);
    ck_assert_uint_eq(kiln_graph_hash(pg), kiln_graph_hash(live));
    kiln_program_free(p);
    assert_bad_graph(pg, live);
    /* and the one kiln_scope_end_graph hands over is the caller's to free, once */
    kiln_device *d = device_new();
    kiln_scope s = kiln_scope_begin(d);
    int64_t n = 4;
    kiln_tensor x = kiln_input(d, "x", F32, 1, &n);
    kiln_tensor y = kiln_exp(x);
    kiln_graph *cg = NULL;
    ck_assert_int_eq(kiln_scope_end_graph(s, 1, &y, NULL, &cg), KILN_OK);
    kiln_clear_error();
    kiln_graph_free(cg);
    ck_assert_int_eq(kiln_errcode(), KILN_OK);
    assert_bad_graph(cg, live);
    ck_assert_int_eq(kiln_device_free(d), KILN_OK);
    kiln_graph_free(live);
}
END_TEST

START_TEST(test_freed_program)
{
    kiln_program *p = program_new((kiln_mode)_i);
    assert_program_works(p);
    kiln_clear_error();
    kiln_program_free(p);
    ck_assert_int_eq(kiln_errcode(), KILN_OK);
    assert_bad_program(p);
    assert_bad_program(p);
}
END_TEST

/* ---- reused blocks -------------------------------------------------------------------
 * The case: eight devices freed, eight made; with malloc's LIFO reuse the new ones
 * used to sit where the old ones were, and freeing a stale pointer freed a new device.
 * The quarantine keeps every block of the last IR_HANDLE_QUARANTINE frees from malloc. */

START_TEST(test_stale_never_names_a_newer_object)
{
    enum { N = 8 };
    kiln_device *stale[N], *fresh[N];
    uint64_t ids[N];
    for (int i = 0; i < N; i++)
        stale[i] = device_new();
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(kiln_device_free(stale[i]), KILN_OK);
    for (int i = 0; i < N; i++) {
        fresh[i] = device_new();
        ids[i] = kiln_device_id(fresh[i]);
    }
    for (int i = 0; i < N; i++)
        for (int k = 0; k < N; k++)
            ck_assert_ptr_ne(fresh[k], stale[i]);
    for (int i = 0; i < N; i++)
        assert_bad_device(stale[i]);
    for (int i = 0; i < N; i++) {
        assert_device_works(fresh[i], ids[i]);
        ck_assert_int_eq(kiln_device_free(fresh[i]), KILN_OK);
    }

    /* the same for programs and graphs */
    kiln_program *sp[N], *fp[N];
    kiln_graph *sg[N], *fg[N];
    for (int i = 0; i < N; i++) {
        sp[i] = program_new(KILN_MODE_INTERP);
        sg[i] = ts_parse(small_text);
    }
    for (int i = 0; i < N; i++) {
        kiln_program_free(sp[i]);
        kiln_graph_free(sg[i]);
    }
    for (int i = 0; i < N; i++) {
        fp[i] = program_new(KILN_MODE_INTERP);
        fg[i] = ts_parse(small_text);
    }
    for (int i = 0; i < N; i++)
        for (int k = 0; k < N; k++) {
            ck_assert_ptr_ne(fp[k], sp[i]);
            ck_assert_ptr_ne((void *)fg[k], (void *)sp[i]);
            ck_assert_ptr_ne((void *)fg[k], (void *)sg[i]);
            ck_assert_ptr_ne((void *)fp[k], (void *)sg[i]);
        }
    for (int i = 0; i < N; i++) {
        assert_bad_program(sp[i]);
        assert_bad_graph(sg[i], fg[0]);
    }
    for (int i = 0; i < N; i++) {
        assert_program_works(fp[i]);
        kiln_program_free(fp[i]);
        ck_assert_int_ne(kiln_graph_num_inputs(fg[i]), -1);
        kiln_graph_free(fg[i]);
    }
}
END_TEST

/* After the quarantine the block goes back to malloc and is allocated again, here filled
 * with a copy of a live object of the same type: the stale pointer is still refused (a
 * check that read the block would see a perfect live object).  In a plain build glibc
 * hands the block straight back; under ASan its own quarantine keeps it, and any read of
 * it would be reported. */
START_TEST(test_reused_block_holding_a_live_copy)
{
    enum { NBLOCKS = 512 };
    kiln_device *live = device_new();
    kiln_graph *glive = ts_parse(small_text);
    kiln_device *d = device_new();
    kiln_graph *g = ts_parse(small_text);
    ck_assert_int_eq(kiln_device_free(d), KILN_OK);
    kiln_graph_free(g);
    /* push them out of the quarantine */
    for (int i = 0; i < IR_HANDLE_QUARANTINE; i++) {
        ck_assert_int_eq(kiln_device_free(device_new()), KILN_OK);
        kiln_graph_free(ts_parse(small_text));
    }
    void **blocks = calloc(2 * NBLOCKS, sizeof *blocks);
    ck_assert(blocks != NULL);
    int reused = 0;
    for (int i = 0; i < NBLOCKS; i++) {
        kiln_device *bd = malloc(sizeof(kiln_device));
        kiln_graph *bg = malloc(sizeof(kiln_graph));
        ck_assert(bd && bg);
        blocks[2 * i] = bd;
        blocks[2 * i + 1] = bg;
        memcpy(bd, live, sizeof *bd);
        memcpy(bg, glive, sizeof *bg);
        reused += (bd == d) + (bg == g);
    }
    if (!reused)
        fprintf(stderr, "check_handles: (malloc did not hand the freed blocks back)\n");
    assert_bad_device(d);
    assert_bad_graph(g, glive);
    for (int i = 0; i < 2 * NBLOCKS; i++)
        free(blocks[i]);
    free(blocks);
    assert_device_works(live, kiln_device_id(live));
    ck_assert_int_eq(kiln_device_free(live), KILN_OK);
    kiln_graph_free(glive);
}
END_TEST

/* ---- foreign and garbage pointers --------------------------------------------------- */

START_TEST(test_foreign_pointers)
{
    kiln_device *d = device_new();
    kiln_graph *g = ts_parse(small_text);
    kiln_program *p = program_new(KILN_MODE_INTERP);
    uint64_t words[16] = {0};
    /* another type's handle, a pointer inside a live object, the stack, and addresses
     * where nothing is mapped (reading any of these would crash or be a wild read) */
    void *bad[] = {g, p, (char *)d + 1, words, (void *)(uintptr_t)16, (void *)(uintptr_t)-64};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_bad_device(bad[i]);
    void *badg[] = {d, p, (char *)g + 8, words, (void *)(uintptr_t)16, (void *)(uintptr_t)-64};
    for (size_t i = 0; i < sizeof badg / sizeof badg[0]; i++)
        assert_bad_graph(badg[i], g);
    void *badp[] = {d, g, (char *)p + 8, words, (void *)(uintptr_t)16, (void *)(uintptr_t)-64};
    for (size_t i = 0; i < sizeof badp / sizeof badp[0]; i++)
        assert_bad_program(badp[i]);
    /* the real ones are untouched */
    assert_device_works(d, kiln_device_id(d));
    assert_program_works(p);
    ck_assert_uint_eq(kiln_graph_hash(g), kiln_graph_hash(kiln_program_graph(p)));
    kiln_program_free(p);
    kiln_graph_free(g);
    ck_assert_int_eq(kiln_device_free(d), KILN_OK);
}
END_TEST

/* ---- threads ----------------------------------------------------------------------------- */

typedef struct race {
    pthread_barrier_t *barrier;
    void *handle;
    int kind; /* 0 device, 1 graph, 2 program */
    kiln_status result;
} race;

static void *
free_racer(void *arg)
{
    race *r = arg;
    kiln_clear_error();
    pthread_barrier_wait(r->barrier);
    if (r->kind == 0) {
        r->result = kiln_device_free(r->handle);
    } else if (r->kind == 1) {
        kiln_graph_free(r->handle);
        r->result = kiln_errcode();
    } else {
        kiln_program_free(r->handle);
        r->result = kiln_errcode();
    }
    return NULL;
}

/* Two threads free one handle at once: exactly one frees it, the other gets MISUSE. */
START_TEST(test_double_free_race)
{
    enum { ROUNDS = 200 };
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, 2);
    for (int i = 0; i < ROUNDS; i++) {
        int kind = i % 3;
        void *h = kind == 0 ? (void *)device_new()
                  : kind == 1 ? (void *)ts_parse(small_text)
                              : (void *)program_new(KILN_MODE_INTERP);
        race r[2] = {{&barrier, h, kind, KILN_OK}, {&barrier, h, kind, KILN_OK}};
        pthread_t t[2];
        for (int k = 0; k < 2; k++)
            ck_assert_int_eq(pthread_create(&t[k], NULL, free_racer, &r[k]), 0);
        for (int k = 0; k < 2; k++)
            pthread_join(t[k], NULL);
        ck_assert_msg((r[0].result == KILN_OK) != (r[1].result == KILN_OK),
                      "round %d: results %d and %d", i, (int)r[0].result, (int)r[1].result);
        ck_assert_int_eq(r[0].result | r[1].result, KILN_ERR_MISUSE);
    }
    pthread_barrier_destroy(&barrier);
}
END_TEST

typedef struct churn {
    kiln_device *d;
    kiln_program *p;
    uint64_t id;
    atomic_int stop;
    long checks;
    long failures;
} churn;

static void *
checker(void *arg)
{
    churn *c = arg;
    float x[4] = {0}, y[4];
    const void *ins[1] = {x};
    void *outs[1] = {y};
    while (!atomic_load(&c->stop)) {
        c->failures += kiln_device_id(c->d) != c->id;
        c->failures += kiln_program_run(c->p, ins, outs) != KILN_OK;
        c->checks++;
    }
    return NULL;
}

/* Lookups take no lock: a live handle is found while other threads grow and shrink the
 * set around it (every growth replaces the table the lookup may be reading). */
START_TEST(test_lookups_during_growth)
{
    enum { MANY = 5000, ROUNDS = 3 };
    churn c = {0};
    c.d = device_new();
    c.id = kiln_device_id(c.d);
    c.p = program_new(KILN_MODE_INTERP);
    atomic_init(&c.stop, 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, checker, &c), 0);
    kiln_device **ds = calloc(MANY, sizeof *ds);
    kiln_program **ps = calloc(MANY / 10, sizeof *ps);
    ck_assert(ds && ps);
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < MANY; i++)
            ds[i] = device_new();
        for (int i = 0; i < MANY / 10; i++)
            ps[i] = program_new(KILN_MODE_INTERP);
        for (int i = 0; i < MANY; i++)
            ck_assert_int_eq(kiln_device_free(ds[i]), KILN_OK);
        for (int i = 0; i < MANY / 10; i++)
            kiln_program_free(ps[i]);
    }
    atomic_store(&c.stop, 1);
    pthread_join(t, NULL);
    ck_assert_msg(c.failures == 0, "%ld of %ld checks failed", c.failures, c.checks);
    ck_assert(c.checks > 0);
    free(ds);
    free(ps);
    kiln_program_free(c.p);
    ck_assert_int_eq(kiln_device_free(c.d), KILN_OK);
}
END_TEST

/* ---- the set itself --------------------------------------------------------------------- */

/* Static: the set's tables and quarantine live as long as the process, as the library's. */
static ir_handle_set test_set = IR_HANDLE_SET_INIT;

START_TEST(test_set_membership)
{
    enum { N = 20000 };
    /* addresses in the pattern malloc gives (a stride of 48) and never dereferenced */
    uintptr_t base = (uintptr_t)1 << 40;
#define ADDR(i) ((void *)(base + 48 * (uintptr_t)(i)))
    ck_assert(!ir_handle_is_live(&test_set, ADDR(0)));
    ck_assert(!ir_handle_remove(&test_set, ADDR(0)));
    for (int i = 0; i < N; i++)
        ck_assert(ir_handle_add(&test_set, ADDR(i)));
    for (int i = 0; i < N; i++)
        ck_assert(ir_handle_is_live(&test_set, ADDR(i)));
    ck_assert(!ir_handle_is_live(&test_set, ADDR(N)));
    ck_assert(!ir_handle_is_live(&test_set, (char *)ADDR(7) + 8));
    /* remove the odd ones, then add them back, many times: deleted slots are reused */
    for (int round = 0; round < 50; round++) {
        for (int i = 1; i < N; i += 2)
            ck_assert(ir_handle_remove(&test_set, ADDR(i)));
        for (int i = 1; i < N; i += 2)
            ck_assert(!ir_handle_remove(&test_set, ADDR(i)));
        for (int i = 0; i < N; i++)
            ck_assert_int_eq(ir_handle_is_live(&test_set, ADDR(i)), i % 2 == 0);
        for (int i = 1; i < N; i += 2)
            ck_assert(ir_handle_add(&test_set, ADDR(i)));
    }
    for (int i = 0; i < N; i++)
        ck_assert(ir_handle_remove(&test_set, ADDR(i)));
    for (int i = 0; i < N; i++)
        ck_assert(!ir_handle_is_live(&test_set, ADDR(i)));
#undef ADDR
}
END_TEST

static ir_handle_set oom_set = IR_HANDLE_SET_INIT;

/* Growing the set may fail: the add says so and the set is as it was. */
START_TEST(test_set_out_of_memory)
{
    uintptr_t base = (uintptr_t)1 << 41;
    int added = 0;
    for (int i = 0; i < 4096; i++) {
        void *a = (void *)(base + 64 * (uintptr_t)i);
        ir_test_fail_alloc_after(0);
        bool ok = ir_handle_add(&oom_set, a);
        ir_test_fail_alloc_after(-1);
        if (!ok) { /* a growth was due: add with memory */
            ck_assert(!ir_handle_is_live(&oom_set, a));
            ck_assert(ir_handle_add(&oom_set, a));
        }
        added += !ok;
        ck_assert(ir_handle_is_live(&oom_set, a));
    }
    ck_assert_int_ge(added, 10); /* 16, 32, ... 8192 slots: every growth failed once */
    for (int i = 0; i < 4096; i++)
        ck_assert(ir_handle_remove(&oom_set, (void *)(base + 64 * (uintptr_t)i)));
    /* and the public constructors fail cleanly when their own allocation fails */
    ir_test_fail_alloc_after(0);
    ck_assert(kiln_device_new() == NULL);
    ir_test_fail_alloc_after(-1);
    assert_exact(KILN_ERR_NOMEM, "kiln_device_new: out of memory");
}
END_TEST

static ir_handle_set quarantine_set = IR_HANDLE_SET_INIT;

/* Retired blocks are freed after IR_HANDLE_QUARANTINE more retirements, not before (under
 * ASan the memset below would be a use-after-free) and, under ASan, not after either. */
START_TEST(test_quarantine)
{
    enum { N = 3 * IR_HANDLE_QUARANTINE };
    unsigned char *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = ir_malloc(32);
        ck_assert(blocks[i] != NULL);
        ck_assert(ir_handle_add(&quarantine_set, blocks[i]));
    }
    for (int i = 0; i < N; i++) {
        ck_assert(ir_handle_remove(&quarantine_set, blocks[i]));
        ir_handle_retire(&quarantine_set, blocks[i]);
        /* the last IR_HANDLE_QUARANTINE retired are still allocated */
        for (int k = i - IR_HANDLE_QUARANTINE + 1; k <= i; k++)
            if (k >= 0)
                memset(blocks[k], 0x5a, 32);
    }
#if UNDER_ASAN
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(__asan_address_is_poisoned(blocks[i]), i < N - IR_HANDLE_QUARANTINE);
#endif
}
END_TEST

static Suite *
handles_suite(void)
{
    Suite *s = suite_create("handles");
    TCase *tc = tcase_create("freed");
    tcase_add_test(tc, test_freed_device);
    tcase_add_test(tc, test_freed_graph);
    tcase_add_loop_test(tc, test_freed_program, KILN_MODE_FUSED, KILN_MODE_COUNT);
    tcase_add_test(tc, test_stale_never_names_a_newer_object);
    tcase_add_test(tc, test_reused_block_holding_a_live_copy);
    tcase_add_test(tc, test_foreign_pointers);
    suite_add_tcase(s, tc);

    tc = tcase_create("threads");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_double_free_race);
    tcase_add_test(tc, test_lookups_during_growth);
    suite_add_tcase(s, tc);

    tc = tcase_create("set");
    tcase_add_test(tc, test_set_membership);
    tcase_add_test(tc, test_set_out_of_memory);
    tcase_add_test(tc, test_quarantine);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return ts_run(handles_suite());
}
