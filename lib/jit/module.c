/* module.c — compiling modules (jit.h): jit_module_lower puts the kernels of n descriptions,
 * of any kind, into one new LLVM module (each kind's emitter, kinds.def's `lower`),
 * jit_modules_generate optimises and generates modules in parallel on the thread pool, and
 * jit_module_link adds one to the JIT (engine.c) and looks its kernels up. */
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>

#include "emit.h"
#include "llvm.h"
#include "vmath.h"

typedef jit_em L;

/* One module being compiled: its unit, what it keeps for the caller, its kernels' names. */
struct jit_module {
    jit_unit u;
    jit_dumps dm;
    bool dumps;
    int n;
    const char *const *names;
};

kiln_status
jit_module_lower(int n, const jit_kdesc *const *d, const char *const *names, bool dumps,
                 bool want_obj, bool quick, jit_module **out)
{
    *out = NULL;
    jit_module *m = ir_calloc(1, sizeof *m);
    if (!m)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
    kiln_status st = jit_unit_new(&m->u, names[0]);
    if (st) {
        ir_free(m);
        return st;
    }
    /* one tier per module (cache.c groups them so): it sets the code generator's level */
    m->u.compact = n > 0 && d[0]->tier == JIT_TIER_COMPACT;
    m->u.quick = quick && !m->u.compact;
    L l;
    jit_em_init(&l, m->u.ctx, m->u.mod);
    for (int i = 0; i < n && !st; i++) {
        IR_ASSERT((d[i]->tier == JIT_TIER_COMPACT) == m->u.compact);
        /* the kernel's vectors are its schedule's (jit_kernel_schedule) */
        IR_ASSERT(d[i]->sched.lanes >= 1 && d[i]->sched.lanes <= 64);
        l.W = d[i]->sched.lanes;
        switch ((jit_kernel_kind)d[i]->kind) { /* every kind, no default (-Werror=switch) */
#define KIND(E, name_, schedule, lower, run, dump)                                             \
    case JIT_KERNEL_##E: st = lower(&l, d[i], names[i]); break;
#include "kinds.def"
#undef KIND
        }
    }
    if (m->u.compact)
        jit_vm_outline(m->u.mod);
    LLVMDisposeBuilder(l.b);
    if (st) {
        jit_module_free(m);
        return st;
    }
    m->dumps = dumps;
    m->dm.want_llvm = m->dm.want_opt = m->dm.want_asm = dumps;
    m->dm.want_obj = want_obj;
    m->n = n;
    m->names = names;
    *out = m;
    return KILN_OK;
}

static void
generate_one(void *ctx, int64_t i)
{
    jit_module *const *m = ctx;
    jit_unit_generate(&m[i]->u, &m[i]->dm);
}

void
jit_modules_generate(int n, jit_module *const *m)
{
    jit_pool_run(generate_one, (void *)m, n);
}

void
jit_module_generate(jit_module *m)
{
    jit_unit_generate(&m->u, &m->dm);
}

kiln_status
jit_module_link(jit_module *m, jit_kernel_fn *fn, void **code, char **dumps, void **obj,
                size_t *obj_len)
{
    int n = m->n;
    void *small[16];
    void **addr = n <= 16 ? small : ir_calloc((size_t)n, sizeof(void *));
    kiln_status st;
    jit_code *c = NULL;
    if (!addr) {
        st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        jit_unit_dispose(&m->u);
    } else {
        st = jit_unit_link(&m->u, n, m->names, addr, &c);
    }
    if (obj) {
        *obj = st ? NULL : m->dm.obj;
        *obj_len = st ? 0 : m->dm.obj_len;
        if (!st)
            m->dm.obj = NULL;
    }
    if (dumps) {
        dumps[0] = m->dm.llvm;
        dumps[1] = m->dm.opt;
        dumps[2] = m->dm.asm_text;
        m->dm.llvm = m->dm.opt = m->dm.asm_text = NULL;
    }
    if (!st) {
        for (int i = 0; i < n; i++)
            memcpy(&fn[i], &addr[i], sizeof *fn); /* object to function pointer, as dlsym */
        *code = c;
    }
    if (addr && addr != small)
        ir_free(addr);
    jit_module_free(m);
    return st;
}

void
jit_module_free(jit_module *m)
{
    if (!m)
        return;
    jit_unit_dispose(&m->u);
    free(m->dm.llvm);
    free(m->dm.opt);
    free(m->dm.asm_text);
    free(m->dm.obj);
    ir_free(m);
}

void
jit_lower_free_code(void *code)
{
    jit_code_free(code);
}
