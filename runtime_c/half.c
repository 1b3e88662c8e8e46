/* CGLOW_HALF, whether the compiler says the target computes in half precision, and cglow_half, the type float16
   maps compute in under --half-math native (cglow/instr/half_math.py): there the compiler's _Float16 (an extension:
   __extension__ keeps -pedantic quiet), elsewhere float, the float32 computation of every other build. */
#if defined(__ARM_FEATURE_FP16_SCALAR_ARITHMETIC)
#define CGLOW_HALF 1
#if defined(__clang__)
/* every half operation rounded, as a half kernel does: clang would fuse an op's a * b + c (HardSigmoid's) into one
   multiply-add (-ffp-contract=on); gcc does not contract in ISO C mode (its VMLA rounds the product) */
#pragma STDC FP_CONTRACT OFF
#endif
__extension__ typedef _Float16 cglow_half;
#else
#define CGLOW_HALF 0
typedef float cglow_half;
#endif
