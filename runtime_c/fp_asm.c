/* CGLOW_FP_ASM: whether the float kernels of the Cortex-M4F's tiles take their hand-scheduled steps
 * (cglow/kernels/arm_steps.py): GNU inline assembly of single-precision VFP instructions (VLDR, VMUL, VADD),
 * on a core with a single-precision FPU and a compiler that takes it (gcc, clang). Elsewhere the kernels
 * compute the same products and sums in C (runtime_c/mul_add.c): the same bits. */
#if defined(__ARM_FP) && (__ARM_FP & 4) && defined(__GNUC__) && defined(__thumb2__)
#define CGLOW_FP_ASM 1
#else
#define CGLOW_FP_ASM 0
#endif
