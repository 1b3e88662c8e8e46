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
