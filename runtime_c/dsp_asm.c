/* CGLOW_DSP_ASM: whether the 8-bit kernels take their hand-scheduled steps (cglow/kernels/arm_steps.py): GNU
 * inline assembly of Thumb-2 DSP instructions (SXTB16, SMLAD), where the helpers use them (CGLOW_DSP), in
 * Thumb-2, optimizing: a step takes up to 13 registers, all but r7 (a frame pointer) and sp, and without
 * optimization gcc may need one more to store them back into a large frame. Elsewhere the kernels compute the
 * same sums in C. */
#if CGLOW_DSP && defined(__thumb2__) && defined(__OPTIMIZE__)
#define CGLOW_DSP_ASM 1
#else
#define CGLOW_DSP_ASM 0
#endif

/* CGLOW_STEP_POINTERS(lp, rp) ends an iteration of a loop of steps, once its pointers have moved on. clang's
 * loop strength reduction rewrites the two pointers as their starting values plus one index: three registers
 * live across the steps and two more added up for each iteration, beside a step's 13. Passed through an empty
 * asm, the pointers are values clang cannot derive, and it keeps them as they are (estimated Cortex-M4 cycles
 * per MAC of int8 kws / resnet8 / autoencoder under clang 14: 1.82 / 1.68 / 1.76 -> 1.79 / 1.65 / 1.75). gcc
 * keeps them so already, and leaves the loop by comparing one with its end, which it could not through the asm. */
#if CGLOW_DSP_ASM && defined(__clang__)
#define CGLOW_STEP_POINTERS(lp, rp) __asm__("" : "+r"(lp), "+r"(rp))
#else
#define CGLOW_STEP_POINTERS(lp, rp) ((void)0)
#endif
