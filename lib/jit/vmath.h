/* vmath.h — elementwise math emitted as LLVM IR (exp, log, tanh, erf, sin, pow, ...).
 *
 * LLVM 19 lowers llvm.exp and friends on vectors to one libm call per lane, ten times too
 * slow for kiln's kernels, so kiln emits its own vector math: range reduction, a minimax
 * polynomial evaluated with llvm.fma, 2^n scaling through exponent bits, and explicit
 * selects for the special values, all branch-free except the rare huge-argument path of
 * sin/cos/tan and fmod's loop.  On hosts with AVX-512 F and VL the 2^n scalings are vscalef
 * and some quotients start from vrcp14 (KILN_VMATH_PORTABLE=1 turns that off); results
 * stay within the same bounds.  Methods, bounds and measured errors: docs/accuracy.md.
 *
 * Use: fill a jit_vm with the unit's context and module and a builder positioned where the
 * value is needed, then call jit_vm_emit on a value `x` of type float, double,
 * <N x float> or <N x double> (any N up to JIT_VM_MAX_LANES).  The result has the type of
 * `x`; the builder stays where it was and the result is inserted at its position.  Each
 * (function, type) is emitted once per module as an internal, alwaysinline function named
 * "kiln.vm.<name>.<type>" (e.g. "kiln.vm.exp.v16f32") and called, so after optimisation the
 * code is inlined into, and fused with, the kernel.  Vectors and scalars run the same
 * instruction sequence lane by lane, so a kernel's vector body and its scalar tail give
 * bit-identical results.
 *
 * No fast-math flags are used: NaN, ±Inf and -0.0 behave as the C library's functions do
 * (C99 Annex F for pow and atan2).  The composite functions follow ops.def literally at
 * ±inf (gelu(-inf) = gelu_erf(-inf) = silu(-inf) = NaN, as -inf * 0 is) and are otherwise
 * accurate to their bound everywhere, including the far negative tail.
 *
 * Not thread-safe per module (LLVM contexts are not); different modules may be built from
 * different threads. */
#ifndef KILN_JIT_VMATH_H
#define KILN_JIT_VMATH_H

#include "llvm.h"

/* The functions: one per VMATH row of ops.def, JIT_VM_<ENUM> for IR_OP_<ENUM>, in the
 * table's order.  Their names, operand counts and ULP bounds are the rows'; binary functions
 * take (x, y) in the op's operand order: pow(x, y) = x^y, atan2(y, x). */
typedef enum jit_vm_fn {
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning)                    \
    IR_IF_VMATH_##calc(JIT_VM_##E, )
#include "ops.def"
#undef OP
    JIT_VM_COUNT
} jit_vm_fn;

#define JIT_VM_MAX_LANES 64

/* Where to emit: the module's context and module, and the caller's builder. */
typedef struct jit_vm {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
} jit_vm;

/* Emit fn(x) (fn(x, y) for binary functions; y is ignored, may be NULL, for unary ones).
 * Returns NULL with KILN_ERR_INTERNAL set when x (or y) is not float/double or a vector of
 * them of at most JIT_VM_MAX_LANES lanes, or when y's type differs from x's. */
IR_HIDDEN LLVMValueRef jit_vm_emit(jit_vm *vm, jit_vm_fn fn, LLVMValueRef x, LLVMValueRef y);

/* fmod(x, y) exactly, as C's fmod on x86 (float `rem`), bit for bit: the sign of x, x
 * itself for |x| < |y|, x's NaN (else y's) quieted for a NaN operand, x86's default NaN
 * (0xffc00000, 0xfff8000000000000) for x = ±inf or y = 0: not the one NaN of the other
 * functions, so that compiled rem equals the reference interpreter's fmod exactly.  A vector
 * loop of long-division steps (each exact by FMA), run while any lane has quotient bits
 * left: once for quotients below 2^52.  Types and errors as jit_vm_emit. */
IR_HIDDEN LLVMValueRef jit_vm_fmod(jit_vm *vm, LLVMValueRef x, LLVMValueRef y);

/* The functions jit_vm_emit calls are internal functions of the module (one per function,
 * type and lane count), inlined at every call by the optimiser's always-inline pass.  This
 * makes those of `mod` out-of-line calls instead (noinline): compact kernels (jit_tier),
 * whose code generation then sees each function's body once per module. */
IR_HIDDEN void jit_vm_outline(LLVMModuleRef mod);

/* The function's ops.def name ("exp", ..., "atan2"), its number of operands and its op;
 * NULL, 0 and IR_OP_COUNT for JIT_VM_COUNT. */
IR_HIDDEN const char *jit_vm_name(jit_vm_fn fn);
IR_HIDDEN int jit_vm_arity(jit_vm_fn fn);
IR_HIDDEN ir_op jit_vm_op(jit_vm_fn fn);
/* The function computing an op (IR_OP_EXP -> JIT_VM_EXP, ...), or JIT_VM_COUNT when the op
 * is not one of these.  The documented bound of each, the largest error in units in the
 * last place of the result's dtype against the exact result, is its row's in ops.def
 * (ir_op_ulp_bound); docs/accuracy.md says how it is measured. */
IR_HIDDEN jit_vm_fn jit_vm_for_op(ir_op op);

#endif
