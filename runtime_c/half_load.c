/* cglow_half, the type float16 maps compute in under --half-math native (instr/half_math.py), and a float16
   value's bits as one. Where the compiler says the target has half-precision arithmetic, the compiler's half type
   (_Float16, an extension: __extension__ keeps -pedantic quiet) and its bits as they are; elsewhere float and the
   exact software conversion, the float32 computation of every other build. */
#if defined(__ARM_FEATURE_FP16_SCALAR_ARITHMETIC)
#if defined(__clang__)
/* every half operation rounded, as a half kernel does: clang would fuse an op's a * b + c (HardSigmoid's) into one
   multiply-add (-ffp-contract=on); gcc does not contract in ISO C mode (its VMLA rounds the product) */
#pragma STDC FP_CONTRACT OFF
#endif
__extension__ typedef _Float16 cglow_half;
static cglow_half cglow_half_load(uint16_t bits)
{
    cglow_half value;
    (void)cglow_half_to_float;  /* the other branch's conversion, which other maps may still call */
    memcpy(&value, &bits, 2);
    return value;
}
#else
typedef float cglow_half;
static cglow_half cglow_half_load(uint16_t bits)
{
    return cglow_half_to_float(bits);
}
#endif
