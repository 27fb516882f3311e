/*
 * ir.h — kiln's tensor IR, internal to the library (and its tests and tools).
 *
 * A graph is an arena of nodes in topological order.  Node ids are indices into
 * graph->nodes; an operand always has a smaller id than its user.  Inputs are nodes with
 * op IR_OP_INPUT listed in declaration order in graph->inputs; outputs name nodes.
 */
#ifndef KILN_IR_H
#define KILN_IR_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln.h"

#define IR_HIDDEN __attribute__((visibility("hidden")))
#define IR_MAX_RANK KILN_MAX_RANK
/* The largest tensor kiln accepts, in bytes (2^48: far above any host's memory, far below
 * where size arithmetic could wrap). */
#define IR_MAX_BYTES ((uint64_t)1 << 48)

/* ---- allocation (fail-the-Nth-allocation hook for tests) -------------------------- */
IR_HIDDEN void *ir_malloc(size_t size);
IR_HIDDEN void *ir_calloc(size_t n, size_t size);
IR_HIDDEN void *ir_realloc(void *p, size_t size);
/* align: a power of two; the size is rounded up to a multiple of it.  Free with ir_free. */
IR_HIDDEN void *ir_aligned_alloc(size_t align, size_t size);
IR_HIDDEN void ir_free(void *p);
IR_HIDDEN char *ir_strdup(const char *s);
/* After `n` more successful allocations, every allocation fails until reset with -1. */
void ir_test_fail_alloc_after(long n);
/* After `n` more successful allocations, exactly one fails; the others succeed.
 * ir_test_fail_pending: whether a failure armed by either is still to come. */
void ir_test_fail_alloc_once(long n);
bool ir_test_fail_pending(void);

/* ---- errors ------------------------------------------------------------------------ */
/* Set the calling thread's error (printf-style message) and return `code`.  Calls the
 * error hook; with KILN_ABORT_ON_MISUSE=1 a misuse-class code prints and aborts. */
IR_HIDDEN kiln_status ir_error(kiln_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
IR_HIDDEN kiln_status ir_verror(kiln_status code, const char *fmt, va_list ap);
/* ---- versioned public structs (abi.c; docs/abi.md) ---------------------------------
 * ir_abi_out: copy the library's whole struct `src` (`own` bytes) into the caller's `dst`,
 * at most dst's leading size_t bytes, never the size field itself.  ir_abi_in: read the
 * caller's `src` into `dst` (`own` bytes, zeroed past the caller's size).  `min` is the end
 * of the first field after size; `type` names the struct in messages.  Errors:
 * KILN_ERR_INVALID_ARG (NULL dst, size < min), KILN_ERR_UNSUPPORTED (in: non-zero bytes past
 * own). */
IR_HIDDEN kiln_status ir_abi_out(const char *api, const char *type, void *dst, const void *src,
                                 size_t own, size_t min);
IR_HIDDEN kiln_status ir_abi_in(const char *api, const char *type, const void *src, void *dst,
                                size_t own, size_t min);
/* The caller's options (NULL: the defaults) as a whole, checked struct: size as above, mode,
 * stores and code in range, no unknown flag bits. */
IR_HIDDEN kiln_status ir_options_read(const char *api, const kiln_options *o, kiln_options *out);

/* ---- configuration from the environment (config.c: the table of every variable) ------
 * Read once, at the first ir_config_get; ir_config_reload reads it again (tests, and
 * kiln bench after its own setenv).  The snapshot is never modified; strings are "" when
 * the variable is unset. */
typedef struct ir_config {
    bool abort_on_misuse;  /* KILN_ABORT_ON_MISUSE=1 */
    int num_threads;       /* KILN_NUM_THREADS, 1..1024; 0: the online cores */
    char cache_dir[4096];  /* KILN_CACHE_DIR ("off" turns the disk cache off) */
    char xdg_cache_home[4096], home[4096];
    uint64_t cache_cap;    /* KILN_CACHE_SIZE_MB in bytes; default 256 MiB; 0: the value is
                            * not a whole number of MiB from 1 to 2^40 - 1 (the disk cache
                            * is off then, saying why) */
    char cache_size_mb[64]; /* KILN_CACHE_SIZE_MB as given (for that message) */
    char dump[256];        /* KILN_DUMP */
    char dump_dir[4096];   /* KILN_DUMP_DIR */
    char test_perturb[64]; /* KILN_TEST_PERTURB (tests only) */
    int test_resize;       /* KILN_TEST_RESIZE: 1 "verify", -1 "off", 0 unset (tests only) */
    bool test_verify;      /* KILN_TEST_VERIFY: verify captured graphs again (tests only) */
    int test_vector_bits;  /* KILN_TEST_VECTOR_BITS: 256, 128, or 0 (tests only) */
    bool vmath_portable;   /* KILN_VMATH_PORTABLE (tests only) */
    const struct ir_config *prev; /* the snapshot a reload replaced */
} ir_config;
IR_HIDDEN const ir_config *ir_config_get(void);
IR_HIDDEN void ir_config_reload(void);

/* Bugs, never bad input: print and abort through the abort hook. */
IR_HIDDEN _Noreturn void ir_bug(const char *file, int line, const char *what);
#define IR_ASSERT(c) ((c) ? (void)0 : ir_bug(__FILE__, __LINE__, #c))

/* ---- live handles (handle.c) -------------------------------------------------------
 * The public pointer handles (kiln_graph, kiln_device, kiln_program) are checked against
 * a set of the live objects of their type before anything reads through them, so a freed,
 * foreign or garbage pointer is KILN_ERR_MISUSE without a read of the memory it names.  A
 * freed object's block is kept from malloc until IR_HANDLE_QUARANTINE more objects of its
 * set have been freed, so a stale pointer cannot name a newer object in the meantime;
 * after that the block may come back as a new object, and the stale pointer then names
 * that live object (a pointer has no room for a generation; kiln.h states the limit).
 * Every function is thread-safe; ir_handle_is_live takes no lock. */
#define IR_HANDLE_QUARANTINE 64
typedef struct ir_handle_table ir_handle_table;
typedef struct ir_handle_set {
    _Atomic(ir_handle_table *) table; /* read without the lock */
    pthread_mutex_t lock;             /* serializes the writers */
    size_t live;
    void *retired[IR_HANDLE_QUARANTINE]; /* freed blocks not yet given back to malloc */
    size_t oldest, nretired;
} ir_handle_set;
#define IR_HANDLE_SET_INIT {NULL, PTHREAD_MUTEX_INITIALIZER, 0, {NULL}, 0, 0}
/* Register a new object; false (no error set) when out of memory. */
IR_HIDDEN bool ir_handle_add(ir_handle_set *set, const void *obj);
IR_HIDDEN bool ir_handle_is_live(ir_handle_set *set, const void *obj);
/* Unregister obj; false when it was not live (nothing changes).  Of two threads freeing
 * one object at once, exactly one sees true. */
IR_HIDDEN bool ir_handle_remove(ir_handle_set *set, const void *obj);
/* Free the block of a removed object (with ir_free), after the quarantine. */
IR_HIDDEN void ir_handle_retire(ir_handle_set *set, void *block);

/* ---- arena ------------------------------------------------------------------------- */
typedef struct ir_chunk ir_chunk;
typedef struct ir_arena {
    ir_chunk *head;
} ir_arena;
/* Zeroed memory aligned to `align` (a power of two <= 64), or NULL (error set). */
IR_HIDDEN void *ir_arena_alloc(ir_arena *a, size_t size, size_t align);
IR_HIDDEN char *ir_arena_strdup(ir_arena *a, const char *s);
IR_HIDDEN char *ir_arena_strndup(ir_arena *a, const char *s, size_t n);
IR_HIDDEN void ir_arena_free(ir_arena *a);

/* ---- dtypes and elements ----------------------------------------------------------- */
IR_HIDDEN bool ir_dtype_is_valid(int dtype);
IR_HIDDEN bool ir_dtype_is_float(kiln_dtype t);
IR_HIDDEN bool ir_dtype_is_int(kiln_dtype t); /* i32, i64 */
/* Parse "f32" … "bool"; -1 when unknown. */
IR_HIDDEN int ir_dtype_from_name(const char *s, size_t n);

/* One element of some dtype, stored as its raw little-endian bytes (so NaN payloads and
 * -0.0 survive exactly). */
typedef struct ir_scalar {
    uint8_t bytes[8];
} ir_scalar;

/* Element access with the cast rules of the op table (CAST row). */
IR_HIDDEN double ir_load_f64(kiln_dtype t, const void *base, size_t i);
IR_HIDDEN int64_t ir_load_i64(kiln_dtype t, const void *base, size_t i);
IR_HIDDEN void ir_store_f64(kiln_dtype t, void *base, size_t i, double v);
IR_HIDDEN void ir_store_i64(kiln_dtype t, void *base, size_t i, int64_t v);
/* Convert element i of (from, src) into element j of (to, dst) by the CAST rules. */
IR_HIDDEN void ir_convert(kiln_dtype to, void *dst, size_t j, kiln_dtype from, const void *src,
                          size_t i);
IR_HIDDEN double ir_scalar_f64(kiln_dtype t, const ir_scalar *s);
IR_HIDDEN int64_t ir_scalar_i64(kiln_dtype t, const ir_scalar *s);
IR_HIDDEN ir_scalar ir_scalar_from_f64(kiln_dtype t, double v);
IR_HIDDEN ir_scalar ir_scalar_from_i64(kiln_dtype t, int64_t v);

/* ---- shapes and types -------------------------------------------------------------- */
typedef struct ir_shape {
    int rank;
    int64_t dims[IR_MAX_RANK];
} ir_shape;

typedef struct ir_type {
    kiln_dtype dtype;
    ir_shape shape;
} ir_type;

/* Element count; KILN_ERR_OVERFLOW (message names `api`) when the count or its byte size
 * exceeds IR_MAX_BYTES (the count here is the product of the non-zero dims, so an empty
 * tensor's other dims are bounded too), KILN_ERR_SHAPE for a negative dim or a rank
 * outside 0..8. */
IR_HIDDEN kiln_status ir_shape_check(const char *api, kiln_dtype t, const ir_shape *s);
IR_HIDDEN size_t ir_shape_count(const ir_shape *s); /* only after ir_shape_check */
IR_HIDDEN size_t ir_type_bytes(const ir_type *t);
IR_HIDDEN bool ir_shape_equal(const ir_shape *a, const ir_shape *b);
IR_HIDDEN bool ir_type_equal(const ir_type *a, const ir_type *b);
/* NumPy broadcast of a and b into *out; false when incompatible. */
IR_HIDDEN bool ir_broadcast(const ir_shape *a, const ir_shape *b, ir_shape *out);
/* Row-major strides in elements of a contiguous tensor of shape s. */
IR_HIDDEN void ir_shape_strides(const ir_shape *s, int64_t *strides);
/* Row-major strides in elements; a size-1 axis gets stride 0 when `bcast` (for reading an
 * operand broadcast to a larger shape: pass the operand's shape left-padded to `rank`). */
IR_HIDDEN void ir_broadcast_strides(const ir_shape *operand, int rank, int64_t *strides);
/* "[4,3]" and "f32[4,3]" into buf (always NUL-terminated); returns buf. */
IR_HIDDEN char *ir_shape_str(const ir_shape *s, char *buf, size_t n);
IR_HIDDEN char *ir_type_str(const ir_type *t, char *buf, size_t n);
#define IR_TYPE_STR_MAX 256

/* Python slice normalisation of one axis of size n: first index and element count. */
IR_HIDDEN void ir_slice_axis(int64_t n, int64_t start, int64_t stop, int64_t step,
                             int64_t *first, int64_t *count);

/* ---- the op table ------------------------------------------------------------------ */
typedef enum ir_kind {
    IR_KIND_SOURCE,
    IR_KIND_UNARY,
    IR_KIND_BINARY,
    IR_KIND_TERNARY,
    IR_KIND_CAST,
    IR_KIND_MOVE,
    IR_KIND_REDUCE,
    IR_KIND_MATMUL,
} ir_kind;

typedef enum ir_trule {
    IR_T_SPECIAL,
    IR_T_ANY,
    IR_T_NUM,
    IR_T_FLOAT,
    IR_T_LOGIC,
    IR_T_FTEST,
    IR_T_CMP,
    IR_T_EQ,
} ir_trule;

/* The attributes, in the order the printer writes them.  ATTR(ENUM, name, kind), the kind
 * saying what the value is in the text: DATA constant data, SCALAR one element of the
 * result dtype, INTS a list of integers, DIMS a list of dimensions, INT one integer, DTYPE
 * a dtype, BOOL true or false.  One exception: arange's `start` is a SCALAR (slice's is
 * the list). */
#define IR_ATTR_LIST(ATTR)                                                                   \
    ATTR(DATA, data, DATA)                                                                   \
    ATTR(VALUE, value, SCALAR)                                                               \
    ATTR(START, start, INTS)                                                                 \
    ATTR(STOP, stop, INTS)                                                                   \
    ATTR(STEP, step, INTS)                                                                   \
    ATTR(DELTA, delta, SCALAR)                                                               \
    ATTR(LOW, low, INTS)                                                                     \
    ATTR(HIGH, high, INTS)                                                                   \
    ATTR(TO, to, DTYPE)                                                                      \
    ATTR(SHAPE, shape, DIMS)                                                                 \
    ATTR(PERM, perm, INTS)                                                                   \
    ATTR(AXIS, axis, INT)                                                                    \
    ATTR(AXES, axes, INTS)                                                                   \
    ATTR(KEEPDIM, keepdim, BOOL)

enum {
#define ATTR(E, name, kind) IR_ATTR_##E##_BIT,
    IR_ATTR_LIST(ATTR)
#undef ATTR
        IR_ATTR_COUNT
};
#define ATTR(E, name, kind) enum { IR_A_##E = 1u << IR_ATTR_##E##_BIT };
IR_ATTR_LIST(ATTR)
#undef ATTR
IR_HIDDEN extern const char *const ir_attr_names[IR_ATTR_COUNT];

/* How compiled kernels compute an op's float results (ops.def's `computed` column). */
typedef enum ir_calc {
    IR_CALC_EXACT,   /* as the interpreter rounds them, bit for bit */
    IR_CALC_VMATH,   /* vector math, within the row's ULP bound of the exact value */
    IR_CALC_REASSOC, /* sums and products in the kernel's order: errbound.c's bound */
} ir_calc;

/* Expanding ops.def for its VMATH rows only: in an OP(...) definition,
 * IR_IF_VMATH_##calc(x) is x in a VMATH row and nothing in the others. */
#define IR_IF_VMATH_VMATH(...) __VA_ARGS__
#define IR_IF_VMATH_EXACT(...)
#define IR_IF_VMATH_REASSOC(...)

typedef enum ir_op {
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning) IR_OP_##E,
#include "ops.def"
#undef OP
    IR_OP_COUNT
} ir_op;

typedef struct ir_op_info {
    const char *name;
    int arity; /* -1: one or more */
    ir_kind kind;
    ir_trule trule;
    unsigned attrs; /* IR_A_* mask */
    ir_calc calc;
    double ulp_f32, ulp_f64; /* VMATH: the bound in ULPs of the result's dtype; else 0 */
    const char *meaning;
} ir_op_info;
IR_HIDDEN extern const ir_op_info ir_ops[IR_OP_COUNT];
/* Op by name; -1 when unknown. */
IR_HIDDEN int ir_op_from_name(const char *s, size_t n);
IR_HIDDEN bool ir_op_is_elementwise(ir_op op); /* unary, binary, ternary, cast */
/* Are op's float results computed by vector math (ops.def: VMATH)? */
IR_HIDDEN bool ir_op_is_vmath(ir_op op);
/* op's VMATH bound for dtype t (f32, f64) in ULPs of t; 0 for exact ops and other dtypes. */
IR_HIDDEN double ir_op_ulp_bound(ir_op op, kiln_dtype t);

/* Attributes of one node; only those in its op's mask are meaningful (the rest zero).
 * The per-axis lists of different ops share their storage (no op has two of the groups:
 * ops.def).  A node points at its attributes (ir_node.at) rather than holding them: only
 * the ops of ops.def with attributes have a struct of their own, in the graph's arena, so
 * a node is 120 bytes instead of 360 and every graph copy, hash and comparison walks a
 * third of the memory.  Set an op's own fields last; read only those. */
typedef struct ir_attrs {
    void *data;       /* CONSTANT: elements (row-major), owned by the graph's arena */
    ir_scalar value;  /* FULL, PAD: fill value; in the result dtype */
    ir_scalar start;  /* ARANGE: first value */
    ir_scalar delta;  /* ARANGE: increment */
    union {
        struct {
            int64_t begin[IR_MAX_RANK]; /* SLICE start per axis (text name: start) */
            int64_t stop[IR_MAX_RANK];  /* SLICE */
            int64_t step[IR_MAX_RANK];  /* SLICE */
        };
        struct {
            int64_t low[IR_MAX_RANK];   /* PAD */
            int64_t high[IR_MAX_RANK];  /* PAD */
        };
        ir_shape shape;        /* RESHAPE, EXPAND: target shape */
        int perm[IR_MAX_RANK]; /* PERMUTE */
    };
    kiln_dtype to;    /* CAST target */
    int axis;         /* CONCAT, GATHER */
    uint32_t axes;    /* reductions: bit i set = reduce axis i */
    bool keepdim;     /* reductions */
} ir_attrs;

/* The attributes of every node whose op has none: all zero. */
IR_HIDDEN extern const ir_attrs ir_no_attrs;

typedef struct ir_node {
    ir_op op;
    int nin;
    int32_t index;      /* INPUT: position in graph->inputs; else 0 */
    ir_type type;       /* result type */
    const int32_t *in;  /* operand node ids, all < this node's id */
    const char *name;   /* value name from text or API; NULL prints as %<id> */
    const ir_attrs *at; /* never NULL: &ir_no_attrs when the op has no attributes, else
                         * the node's own, in its graph's arena (set once, never written) */
} ir_node;

typedef struct ir_output {
    const char *name;
    int32_t node;
} ir_output;

#define IR_MAX_NODES (1 << 24)

struct kiln_graph {
    ir_arena arena;
    const char *name;
    ir_node *nodes;
    int32_t nnodes, capnodes;
    int32_t *inputs; /* node ids in declaration order */
    int32_t ninputs, capinputs;
    ir_output *outputs;
    int32_t noutputs, capoutputs;
    _Atomic int32_t shares; /* owners besides the first (ir_graph_share) */
    /* every named node (inputs included) by name: open addressing, node id + 1 per slot
     * (0: empty), at most half full; ir_graph_find's index */
    int32_t *names;
    int32_t capnames, nnames;
    /* a derived graph (ir_graph_derive): the graph whose arena holds its nodes' operand
     * lists, names, attributes and data, one share of it held; NULL: all in its own */
    kiln_graph *base;
};

/* ---- building graphs (used by the parser and by capture) --------------------------- */
/* A new empty graph named `name` (NULL: "main"); NULL with error set on failure. */
IR_HIDDEN kiln_graph *ir_graph_new(const char *name);
/* g is a live graph (non-NULL, made by ir_graph_new, not yet freed); never reads *g. */
IR_HIDDEN bool ir_graph_is_valid(const kiln_graph *g);
/* Append an input; returns its node id or -1 (error set: bad type, duplicate name). */
IR_HIDDEN int32_t ir_graph_add_input(kiln_graph *g, const char *name, const ir_type *type);
/* Append a node, inferring and checking its type with the op's rule (errors name `api`,
 * the op and the shapes).  For sources `given` is the result type and is required; for
 * others a non-NULL `given` must equal the inferred type.  Copies `in`, `name` and, for a
 * CONSTANT, attrs->data (ir_type_bytes of the result).  Returns the id or -1. */
IR_HIDDEN int32_t ir_graph_add_node(kiln_graph *g, const char *api, ir_op op, int nin,
                                    const int32_t *in, const ir_attrs *attrs,
                                    const ir_type *given, const char *name);
/* Append an output.  `name` NULL leaves it unnamed, for capture to name when the scope
 * ends (ir_graph_verify rejects an unnamed output). */
IR_HIDDEN kiln_status ir_graph_add_output(kiln_graph *g, const char *name, int32_t node);
/* A copy of g with its inputs first (in their order) and every other node after them in
 * g's order — the numbering a parsed graph has.  With `input_types` (one per input) the
 * inputs take those types and every non-source type is inferred again by the op rules
 * (errors name "kiln").  NULL with the error set on failure. */
IR_HIDDEN kiln_graph *ir_graph_rebuild(const kiln_graph *g, const ir_type *input_types);
/* Append a copy of node n of graph `from` (a node that passed the type rule there) with
 * operands `in`, ids in g.  When the operands have the types n's had, n's type, attributes
 * and name are copied as they are (no type rule run again: a copy of a captured graph
 * costs a third as much); else it is ir_graph_add_node.  An INPUT becomes g's next input,
 * its name not checked against g's (the caller copies nodes of one graph, whose names
 * are distinct).  Returns the id or -1. */
IR_HIDDEN int32_t ir_graph_copy_node(kiln_graph *g, const kiln_graph *from, int32_t n,
                                     const int32_t *in);
/* A copy of the complete graph g with n of its nodes, node orig[j] of g its node j
 * (orig ascending), every node x of g that the copy keeps or that an operand names mapped
 * to map[x] (orig[map[x]] == x for a kept node; another kept node of the same value for a
 * merged one): simplify's result replayed.  Its nodes, inputs, outputs and names index are
 * arrays of its own (the caller may change a node: its op to another of the same operands
 * and type, say), and so is an operand list that the map renumbers; the rest of its nodes'
 * operand lists, names, attributes and constant data are g's: it holds a share of g
 * (ir_graph_share) until it is freed.  A copy in a few loops, instead of a node at a time
 * with the type rule's checks.  NULL with the error set when out of memory. */
IR_HIDDEN kiln_graph *ir_graph_derive(const kiln_graph *g, int32_t n, const int32_t *orig,
                                      const int32_t *map);
/* One more owner of the complete graph g (graphs are immutable once complete, so owners
 * may share one instead of each holding a copy): kiln_graph_free frees it when the last
 * owner does.  Returns g. */
IR_HIDDEN kiln_graph *ir_graph_share(const kiln_graph *g);
/* Renumber g (not a derived graph) in place as ir_graph_rebuild(g, NULL) would copy it:
 * its inputs first, in their order, then every other node in g's order (names, attributes
 * and data stay where they are).  False with the error set when out of memory (g unchanged). */
IR_HIDDEN bool ir_graph_inputs_first(kiln_graph *g);
/* Room for `nodes` nodes in g, so that adding them does not grow its arrays again (a copy of
 * a graph of known size); false with the error set when out of memory. */
IR_HIDDEN bool ir_graph_reserve(kiln_graph *g, int32_t nodes);
/* Look up a value by name (inputs and named nodes); -1 when absent. */
IR_HIDDEN int32_t ir_graph_find(const kiln_graph *g, const char *name, size_t n);

/* The type rule of `op` applied to operands `in` of g: the result type, or an error
 * "<api>: <problem>: <detail>" naming the op and the offending shapes/dtypes. */
IR_HIDDEN kiln_status ir_infer(const kiln_graph *g, const char *api, ir_op op, int nin,
                               const int32_t *in, const ir_attrs *attrs, const ir_type *given,
                               ir_type *out);
/* Whole-graph check: topological order, every node's rule, input/output boundaries,
 * unique names.  Messages name the node ("node %7 (add)"). */
IR_HIDDEN kiln_status ir_graph_verify(const kiln_graph *g);

/* ---- hash ---------------------------------------------------------------------------- */
IR_HIDDEN uint64_t ir_graph_hash(const kiln_graph *g, bool generic);
IR_HIDDEN bool ir_graph_equal(const kiln_graph *a, const kiln_graph *b);
/* The one hash-mixing helper (splitmix64's finaliser) over n bytes, from `seed`: for hashed
 * lookups, not for anything an attacker chooses (lib/jit's disk cache uses BLAKE3). */
IR_HIDDEN uint64_t ir_hash_bytes(uint64_t seed, const void *p, size_t n);

/* ---- text format (print.c, parse.c) -------------------------------------------------- */
/* Print one element of dtype t exactly (shortest decimal that round-trips, inf, -inf,
 * nan, nan:0x<bits> for a NaN other than the default quiet NaN, true/false). */
IR_HIDDEN int ir_print_scalar(char *buf, size_t n, kiln_dtype t, const void *elem);
IR_HIDDEN kiln_status ir_graph_print(const kiln_graph *g, FILE *f);
IR_HIDDEN kiln_status ir_graph_print_dot(const kiln_graph *g, FILE *f);
/* Parse `text` (length len); on success *out is a new verified graph.  `srcname` names
 * the source in messages ("file.kiln:3:14: ..."); NULL gives "<input>". */
IR_HIDDEN kiln_status ir_parse(const char *text, size_t len, const char *srcname,
                               kiln_graph **out);

/* ---- reference interpreter (interp.c) ------------------------------------------------ */
/* Run a verified graph.  inputs[i] / outputs[i] as in kiln_graph_interpret. */
IR_HIDDEN kiln_status ir_interpret(const kiln_graph *g, const void *const *inputs,
                                   void *const *outputs);

#endif /* KILN_IR_H */
