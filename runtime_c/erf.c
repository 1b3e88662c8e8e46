/* erf(x) in float, without a library call, so that a GELU or Erf loop vectorizes: x * P(x^2) / Q(x^2)
 * on |x| <= 3.92 (beyond, erf rounds to +-1 in float), a rational least-squares fit of degree 4 / 5 in
 * x^2 (scripts/fit_erf.py derives the coefficients); the largest error is 6e-7 (C99 erff's is 1e-7).
 * No branch: NaN fails both comparisons and propagates. */
static float cglow_erf(float x)
{
    const float c = x < -3.92f ? -3.92f : x > 3.92f ? 3.92f : x;
    const float t = c * c;
    const float p = 1.12837815f + t * (0.309089929f + t * (0.0666517317f + t * (0.00834047236f + t * 0.000299419014f)));
    const float q = 1.0f + t * (0.607244074f + t * (0.161535025f + t * (0.0242310166f + t * (0.00210507843f + t * 1.75579844e-05f))));
    return c * p / q;
}
