/* CGLOW_CLIP(x, lo, hi): x clamped to literal bounds lo <= hi, a NaN kept (ONNX Clip, ReLU6). gcc vectorizes
 * x < lo ? lo : x > hi ? hi : x best, each test on x (x86-64 AVX-512 -O3: 109 instructions for vww's first
 * pointwise kernel, 157 testing min(x, hi) against lo); clang turns that text into branches, a three-way join
 * that its SLP vectorizer cannot cross, and left the register tiles that end in it scalar (clang 14: vww 3x gcc's
 * time). With lo <= hi, min(x, hi) < lo exactly when x < lo (and not for a NaN), so clang tests that: the same
 * value, as two selects. */
#if defined(__clang__)
#define CGLOW_CLIP(x, lo, hi) (((x) > (hi) ? (hi) : (x)) < (lo) ? (lo) : (x) > (hi) ? (hi) : (x))
#else
#define CGLOW_CLIP(x, lo, hi) ((x) < (lo) ? (lo) : (x) > (hi) ? (hi) : (x))
#endif
