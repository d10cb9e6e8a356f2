/* kernels/cpu/vmath.h — vectorisable float math for the cpu kernels (elemwise.c, the
 * fused elementwise interpreter fused.c). */
#ifndef MX_VMATH_H
#define MX_VMATH_H

/* libmvec: non-builtin aliases of libm functions, declared with SIMD clones, so GCC
 * vectorises loops calling them (it refuses the builtins without -fno-math-errno). */
#define VDECL(T, name, sym) \
  __attribute__((simd("notinbranch"), const, nothrow)) T name(T) __asm__(sym);
#define VDECL2(T, name, sym) \
  __attribute__((simd("notinbranch"), const, nothrow)) T name(T, T) __asm__(sym);
VDECL(float, v_expf, "expf") VDECL(double, v_exp, "exp")
VDECL(float, v_logf, "logf") VDECL(double, v_log, "log")
VDECL(float, v_tanhf, "tanhf") VDECL(double, v_tanh, "tanh")
VDECL(float, v_sinf, "sinf") VDECL(double, v_sin, "sin")
VDECL(float, v_cosf, "cosf") VDECL(double, v_cos, "cos")
VDECL(float, v_log1pf, "log1pf") VDECL(double, v_log1p, "log1p")
VDECL(float, v_expm1f, "expm1f") VDECL(double, v_expm1, "expm1")
VDECL(float, v_erff, "erff") VDECL(double, v_erf, "erf")
VDECL2(float, v_powf, "powf") VDECL2(double, v_pow, "pow")

/* AVX-512 clone for compute-bound loops (memory-bound ones gain nothing from it). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#ifdef __SANITIZE_THREAD__ /* ThreadSanitizer cannot run the ifunc resolvers clones need */
#define HEAVY
#else
#define HEAVY __attribute__((target_clones("avx512f", "default")))
#endif
#else
#define HEAVY
#endif

#endif
