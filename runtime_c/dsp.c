/* CGLOW_DSP: whether the 8-bit helpers use the Arm DSP extension's instructions (SXTB16, SXTAB16, SMLAD,
 * SMLABB, through the ACLE intrinsics and GNU asm) instead of their plain C: on a core that has them, with a
 * compiler that takes GNU asm (gcc, clang), little-endian. The panel's widened pairs (runtime_c/widen4.c) and
 * the weights in channel pairs (instr/passes.py pair_weights) are laid out by the bytes' order in memory,
 * which the instructions see as the word's low byte first only on a little-endian core. */
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__) && !defined(__ARM_BIG_ENDIAN)
#include <arm_acle.h>
#define CGLOW_DSP 1
#else
#define CGLOW_DSP 0
#endif
