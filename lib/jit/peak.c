/* peak.c — the machine's FMA peak, measured the way kiln bench probes bandwidth: a
 * kiln-compiled loop of independent vector FMA chains (f32, the host's vector width, more
 * chains than the FMA units' latency x throughput), run in chunks on the same thread pool
 * as the kernels.  What compute-bound workloads report as fraction_of_peak. */
#include <pthread.h>
#include <string.h>

#include <llvm-c/Core.h>

#include "emit.h"
#include "llvm.h"

#define ITERS 4096 /* per chunk */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static jit_kernel_fn loop_fn;
static jit_code *loop_code;
static int nacc;

/* void loop(ptrs, strides, dims, begin, end, aux): end - begin iterations of nacc chains
 * acc = fma(acc, m, c); their sum is stored at aux (so nothing is dead). */
static kiln_status
build(void)
{
    jit_unit u;
    kiln_status st = jit_unit_new(&u, "kiln_fma_peak");
    if (st)
        return st;
    jit_em l;
    jit_em_init(&l, u.ctx, u.mod);
    LLVMBuilderRef b = l.b;
    nacc = jit_host_info()->vector_bits == 512 ? 24 : 12;
    LLVMTypeRef vt = jit_em_vec(&l, l.f32);
    LLVMTypeRef params[6] = {l.ptr, l.ptr, l.ptr, l.i64, l.i64, l.ptr};
    LLVMValueRef fn = LLVMAddFunction(u.mod, "kiln_fma_loop",
                                      LLVMFunctionType(LLVMVoidTypeInContext(u.ctx), params, 6, 0));
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(u.ctx, fn, "entry");
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(u.ctx, fn, "head");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(u.ctx, fn, "body");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(u.ctx, fn, "done");
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef n = LLVMBuildSub(b, LLVMGetParam(fn, 4), LLVMGetParam(fn, 3), "");
    LLVMValueRef m = jit_em_splat(&l, LLVMConstReal(l.f32, 0.999999));
    LLVMValueRef c = jit_em_splat(&l, LLVMConstReal(l.f32, 1e-7));
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, head);
    LLVMValueRef i = LLVMBuildPhi(b, l.i64, "i");
    LLVMValueRef acc[32], next[32];
    for (int k = 0; k < nacc; k++)
        acc[k] = LLVMBuildPhi(b, vt, "acc");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i, n, ""), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    for (int k = 0; k < nacc; k++) {
        LLVMValueRef args[3] = {acc[k], m, c};
        next[k] = jit_em_intr(&l, "llvm.fma", &vt, 1, args, 3);
    }
    LLVMValueRef i2 = LLVMBuildAdd(b, i, jit_em_i64(&l, 1), "");
    LLVMBuildBr(b, head);
    LLVMBasicBlockRef bb[2] = {entry, body};
    LLVMValueRef iin[2] = {jit_em_i64(&l, 0), i2};
    LLVMAddIncoming(i, iin, bb, 2);
    for (int k = 0; k < nacc; k++) {
        LLVMValueRef in[2] = {jit_em_splat(&l, LLVMConstReal(l.f32, 1.0 + k * 1e-3)), next[k]};
        LLVMAddIncoming(acc[k], in, bb, 2);
    }
    LLVMPositionBuilderAtEnd(b, done);
    LLVMValueRef sum = acc[0];
    for (int k = 1; k < nacc; k++)
        sum = LLVMBuildFAdd(b, sum, acc[k], "");
    LLVMValueRef st0 = LLVMBuildStore(b, sum, LLVMGetParam(fn, 5));
    LLVMSetAlignment(st0, 4);
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
    const char *names[1] = {"kiln_fma_loop"};
    void *addr[1];
    if ((st = jit_unit_compile(&u, 1, names, addr, &loop_code, NULL)))
        return st;
    memcpy(&loop_fn, &addr[0], sizeof loop_fn);
    return KILN_OK;
}

typedef struct pctx {
    float *out; /* W floats per chunk */
    int W;
} pctx;

static void
chunk(void *ctx, int64_t i)
{
    const pctx *p = ctx;
    loop_fn(NULL, NULL, NULL, 0, ITERS, p->out + i * p->W);
}

kiln_status
jit_fma_peak(int chunks_per_thread, double *gflops)
{
    *gflops = 0;
    pthread_mutex_lock(&lock);
    kiln_status st = loop_fn ? KILN_OK : build();
    pthread_mutex_unlock(&lock);
    if (st)
        return st;
    int threads = jit_pool_threads();
    int64_t nchunks = (int64_t)threads * (chunks_per_thread > 0 ? chunks_per_thread : 1);
    pctx p = {NULL, jit_host_info()->vector_bits / 32};
    p.out = ir_calloc((size_t)(nchunks * p.W), sizeof(float));
    if (!p.out)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
    double t0 = jit_now_ms();
    jit_pool_run(chunk, &p, nchunks);
    double ms = jit_now_ms() - t0;
    ir_free(p.out);
    double flops = (double)nchunks * ITERS * nacc * p.W * 2.0;
    *gflops = ms > 0 ? flops / (ms * 1e-3) * 1e-9 : 0;
    return KILN_OK;
}
