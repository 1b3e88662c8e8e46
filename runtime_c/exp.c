/* e^x in float, without a library call, so that a Softmax, Sigmoid or Exp loop vectorizes: x = n ln2 + r
 * with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 split in two so that n ln2 is exact), e^r by a polynomial
 * of degree 6 fitted to it (least squares of the relative error at Chebyshev nodes: 1.8e-8 off before float
 * rounding; its Taylor polynomial of degree 7 took one step more, the EfficientNet-style model 583 -> 552 us
 * under gcc 12 with one fewer), 2^n written as exponent bits. Error at most 1.2e-7 relative. Below -87.34
 * (where e^x is no longer a normal float) the result is 0; from 88.38 (2^127.5) it is infinity (C's expf:
 * from 88.72); NaN propagates. No branch, every comparison unconditional, and no conversion between float and
 * integer (gcc does not vectorize a loop where one may trap after a comparison): n is rounded by adding
 * 1.5 * 2^23, its bits taken from the sum's mantissa; with -ffast-math, which would cancel that addition, by a
 * conversion instead (which may not trap then).
 * inline: without it gcc 12 -O3 inlined it into a loop only while the function stayed under its limit for
 * functions not declared inline (max-inline-insns-auto): a convolution or matrix product with a SiLU or Sigmoid
 * epilogue, unrolled by tiles, called it per element and no longer vectorized (the EfficientNet-style zoo model,
 * -march=native on AVX-512: 9.9 ms, a third of it in cglow_exp, then 0.88 ms; onnxruntime 1.0 ms). The
 * polynomial's steps are fused multiply-adds where one is an instruction at an add's cost (x86-64 with FMA,
 * AArch64): gcc -std=c99 does not contract a * b + c (clang does), and the fused steps ran a SiLU 20% faster
 * under gcc 12 (0.35 -> 0.28 ns an element, AVX-512). A Cortex-M4F takes 3 cycles for a fused one, 2 for a
 * multiply and an add (the EfficientNet-style model +1.6% cycles fused): it keeps them apart. */
#if (defined(__x86_64__) || defined(__aarch64__)) && (defined(FP_FAST_FMAF) || defined(__FP_FAST_FMAF))
#define CGLOW_EXP_STEP(r, y, c) fmaf(r, y, c)
#else
#define CGLOW_EXP_STEP(r, y, c) ((r) * (y) + (c))
#endif
static inline float cglow_exp(float x)
{
    const float high = x < 88.3762626f ? x : 88.3762626f;
    const float c = high > -87.3365448f ? high : -87.3365448f;
    const float t = c * 1.44269504f + 12582912.0f;
    uint32_t bits;
    float n, r, scale, y;
    memcpy(&bits, &t, sizeof bits);
    bits -= 0x4B400000u; /* n, two's complement */
#if defined(__FAST_MATH__)
    n = (float)(int32_t)bits;
#else
    n = t - 12582912.0f;
#endif
    r = (c - n * 0.693359375f) + n * 2.12194440e-4f;
    bits = (bits + 127u) << 23;
    memcpy(&scale, &bits, sizeof scale);
    y = CGLOW_EXP_STEP(r, 1.3829421e-3f, 8.3747711e-3f);
    y = CGLOW_EXP_STEP(r, y, 4.1668359e-2f);
    y = CGLOW_EXP_STEP(r, y, 1.6666421e-1f);
    y = CGLOW_EXP_STEP(r, y, 4.9999991e-1f);
    y = CGLOW_EXP_STEP(r, y, 1.0f);
    y = scale * CGLOW_EXP_STEP(r, y, 1.0f);
    y = x < -87.3365448f ? 0.0f : y;
    y = x > 88.3762626f ? INFINITY : y;
    return x != x ? x : y;
}
