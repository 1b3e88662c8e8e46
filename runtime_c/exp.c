/* e^x in float, without a library call, so that a Softmax, Sigmoid or Exp loop vectorizes: x = n ln2 + r
 * with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 split in two so that n ln2 is exact), e^r by its Taylor
 * polynomial of degree 7 (truncation error below 5e-9), 2^n written as exponent bits. Error at most 1e-7
 * relative. Below -87.34 (where e^x is no longer a normal float) the result is 0; from 88.38 (2^127.5) it
 * is infinity (C's expf: from 88.72); NaN propagates. No branch, every comparison unconditional, and no
 * conversion between float and integer (gcc does not vectorize a loop where one may trap after a
 * comparison): n is rounded by adding 1.5 * 2^23, its bits taken from the sum's mantissa; with
 * -ffast-math, which would cancel that addition, by a conversion instead (which may not trap then).
 * inline: without it gcc 12 -O3 inlined it into a loop only while the function stayed under its limit for
 * functions not declared inline (max-inline-insns-auto): a convolution or matrix product with a SiLU or Sigmoid
 * epilogue, unrolled by tiles, called it per element and no longer vectorized (the EfficientNet-style zoo model,
 * -march=native on AVX-512: 9.9 ms, a third of it in cglow_exp, then 0.88 ms; onnxruntime 1.0 ms). */
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
    y = scale * (1.0f + r * (1.0f + r * (0.5f + r * (1.66666672e-1f + r * (4.16666679e-2f + r * (8.33333377e-3f +
        r * (1.38888892e-3f + r * 1.98412701e-4f)))))));
    y = x < -87.3365448f ? 0.0f : y;
    y = x > 88.3762626f ? INFINITY : y;
    return x != x ? x : y;
}
