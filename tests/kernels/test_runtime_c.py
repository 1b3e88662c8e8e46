"""The runtime_c helpers on their own: cglow_exp, cglow_tanh and cglow_erf against NumPy in double precision over
their whole float range, edges and NaN included, with the strict flags and with -ffast-math; the
requantizations and TFLite's fixed-point primitives against exact rational arithmetic; the quantization of a
float against NumPy's rint. Each helper runs in a program of its own (floats in on stdin, out on stdout): a
library built with -ffast-math would set flush-to-zero for the whole test process when loaded."""
from __future__ import annotations

from fractions import Fraction
import math
import subprocess

import numpy as np
import pytest

from cglow.tools.host import HOST_FLAGS, build_cached
from cglow.lower.ops.quant import never_halfway, offset_fits, tflite_high_fits
from cglow.runtime_files import RUNTIME_C

HELPERS = RUNTIME_C
DRIVER = """#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
{helper}
int main(void)
{{
    float x;
    while (fread(&x, sizeof x, 1, stdin) == 1) {{
        const float y = cglow_{name}(x);
        fwrite(&y, sizeof y, 1, stdout);
    }}
    return 0;
}}
"""


def helper(name: str, flags, needs: tuple[str, ...] = ()) -> callable:
    """cglow_NAME as a NumPy function, with the helpers it calls (`needs`) before it."""
    source = DRIVER.format(helper="\n".join((HELPERS / f"{n}.c").read_text() for n in (*needs, name)), name=name)
    program = build_cached({f"{name}.c": source}, "cc", flags, f"runtime-{name}-{{}}")

    def apply(x: np.ndarray) -> np.ndarray:
        run = subprocess.run([str(program)], input=np.asarray(x, "<f4").tobytes(), capture_output=True, check=True)
        return np.frombuffer(run.stdout, "<f4")
    return apply


def spread(lo: float, hi: float) -> np.ndarray:
    """Dense near zero, every float exponent up to the ends."""
    rng = np.random.default_rng(0)
    return np.concatenate([np.linspace(lo, hi, 200001), rng.uniform(lo, hi, 100000),
                           np.geomspace(1e-30, hi, 3000), -np.geomspace(1e-30, -lo, 3000)]).astype(np.float32)


@pytest.mark.parametrize("flags, bound", [((), 1.2e-7), (("-ffast-math",), 5e-6)])
def test_exp_is_within_a_few_ulp(flags, bound):
    exp = helper("exp", list(HOST_FLAGS) + list(flags))
    x = spread(-87.3, 88.3)
    want = np.exp(x.astype(np.float64))
    assert np.max(np.abs(exp(x) - want) / want) <= bound


def test_exp_edges():
    exp = helper("exp", HOST_FLAGS)
    x = np.array([-np.inf, -1e30, -88.0, 0.0, -0.0, 88.5, 1e30, np.inf, np.nan], np.float32)
    got = exp(x)
    assert list(got[:3]) == [0.0, 0.0, 0.0] and list(got[3:5]) == [1.0, 1.0]
    assert np.all(np.isposinf(got[5:8])) and np.isnan(got[8])


def test_tanh_is_within_a_few_ulp():
    tanh = helper("tanh", HOST_FLAGS, needs=("exp",))
    x = spread(-12.0, 12.0)
    x = x[x != 0]
    want = np.tanh(x.astype(np.float64))
    assert np.max(np.abs(tanh(x) - want) / np.abs(want)) <= 2e-7
    edges = tanh(np.array([-np.inf, -1e30, 0.0, 1e30, np.inf, np.nan], np.float32))
    assert list(edges[:5]) == [-1.0, -1.0, 0.0, 1.0, 1.0] and np.isnan(edges[5])


def test_erf_is_within_its_fit():
    from math import erf
    cglow_erf = helper("erf", HOST_FLAGS)
    x = spread(-6.0, 6.0)
    want = np.vectorize(erf)(x.astype(np.float64))
    assert np.max(np.abs(cglow_erf(x) - want)) <= 7e-7
    assert np.allclose(cglow_erf(np.array([-np.inf, np.inf], np.float32)), [-1.0, 1.0], rtol=0, atol=7e-7)
    assert np.isnan(cglow_erf(np.array([np.nan], np.float32))[0])


REQUANT_DRIVER = """#include <stdint.h>
#include <stdio.h>
{helpers}
int main(void)
{{
    int32_t v[3];
    while (fread(v, sizeof v, 1, stdin) == 1) {{
        const int32_t y[2] = {{cglow_requant(v[0], v[1], v[2], 3, -128, 127),
                              v[2] > 32 ? cglow_requant_high(v[0], v[1], v[2] - 33, 3, -128, 127) : 0}};
        fwrite(y, sizeof y, 1, stdout);
    }}
    return 0;
}}
"""


def requants(rows: np.ndarray) -> np.ndarray:
    """cglow_requant and cglow_requant_high (shifts above 32) of each (acc, multiplier, shift), zero 3 and int8
    bounds."""
    helpers = "\n".join((HELPERS / f"{n}.c").read_text() for n in ("clamp", "requant", "requant_high"))
    program = build_cached({"requant.c": REQUANT_DRIVER.format(helpers=helpers)}, "cc", HOST_FLAGS, "requant-{}")
    run = subprocess.run([str(program)], input=np.asarray(rows, "<i4").tobytes(), capture_output=True, check=True)
    return np.frombuffer(run.stdout, "<i4").reshape(-1, 2)


def test_requant_rounds_exactly_halves_to_even():
    """cglow_requant against exact rational arithmetic, both branches (shift up to 32 and above), ties made
    on purpose by power-of-two multipliers, and random ones."""
    rng = np.random.default_rng(5)
    rows = [(a, 1 << 30, s) for s in (1, 8, 31, 32, 33, 34, 40, 62) for a in range(-600, 600)]
    rows += [(int(a), int(m), int(s)) for a, m, s in zip(rng.integers(-2 ** 31, 2 ** 31, 20000),
                                                         rng.integers(2 ** 30, 2 ** 31, 20000),
                                                         rng.integers(1, 63, 20000))]
    got = requants(np.array(rows))[:, 0]
    want = [min(127, max(-128, round(Fraction(a * m, 1 << s)) + 3)) for a, m, s in rows]  # round: halves to even
    assert np.array_equal(got, want)


def test_requant_high_equals_requant_where_no_accumulator_is_halfway():
    """Where never_halfway says so (shifts above 32, accumulators below the bound that makes a tie
    possible) and offset_fits (the zero point's term, here 7 * 2^(shift - 33), below 2^30: shifts up to 60),
    cglow_requant_high gives cglow_requant's result; power-of-two multipliers at the bound do reach ties, and
    never_halfway refuses them."""
    rng = np.random.default_rng(6)
    rows = []
    assert offset_fits(3, np.array([60])) and not offset_fits(3, np.array([61]))
    for _ in range(300):
        m, s = int(rng.integers(2 ** 30, 2 ** 31)) >> int(rng.integers(0, 20)) << int(rng.integers(0, 20)), \
            int(rng.integers(33, 61))
        m = min(max(m, 1), 2 ** 31 - 1)
        bound = min((1 << max(s - 1 - ((m & -m).bit_length() - 1), 0)) - 1, 2 ** 31 - 1)
        assert never_halfway(np.array([m]), np.array([s]), bound)
        assert bound == 2 ** 31 - 1 or not never_halfway(np.array([m]), np.array([s]), bound + 1)
        rows += [(int(a), m, s) for a in rng.integers(-bound, bound + 1, 200)] + [(bound, m, s), (-bound, m, s)]
    got = requants(np.array(rows))
    assert np.array_equal(got[:, 0], got[:, 1])
    assert not never_halfway(np.array([2 ** 30]), np.array([32]), 0)
    tie = requants(np.array([(1 << 9, 1 << 30, 40)]))  # 2^39 / 2^40: exactly half
    assert tie[0, 0] == 3 and tie[0, 1] == 4


QUANTIZE_DRIVER = """#include <math.h>
#include <stdint.h>
#include <stdio.h>
{helper}
int main(void)
{{
    float x;
    while (fread(&x, sizeof x, 1, stdin) == 1) {{
        const int32_t q[3] = {{cglow_quantize(x, 0, -128, 127), cglow_quantize(x, -128, -128, 127),
                               cglow_quantize(x, 131, 0, 255)}};
        fwrite(q, sizeof q, 1, stdout);
    }}
    return 0;
}}
"""


@pytest.mark.parametrize("flags", [HOST_FLAGS, ("-O0", "-std=c99"), ("-O3", "-std=c99")])
def test_quantize_rounds_halves_to_even_and_saturates(flags):
    """cglow_quantize against NumPy's rint (halves to even) and saturation, over halves, the bounds' edges,
    huge values, infinities and NaN (lo)."""
    program = build_cached({"quantize.c": QUANTIZE_DRIVER.format(helper=(HELPERS / "quantize.c").read_text())},
                           "cc", flags, "runtime-quantize-{}")
    rng = np.random.default_rng(5)
    x = np.concatenate([np.arange(-400, 400, 0.25), rng.uniform(-300, 300, 20000), rng.standard_normal(1000),
                        np.nextafter(np.arange(-300.5, 300.5), np.inf), np.nextafter(np.arange(-300.5, 300.5), -np.inf),
                        [3e38, -3e38, np.inf, -np.inf, np.nan, 2.0 ** 22 + 0.5, 8388607.5, -1e-30]]).astype(np.float32)
    out = subprocess.run([str(program)], input=x.tobytes(), capture_output=True, check=True).stdout
    got = np.frombuffer(out, np.int32).reshape(-1, 3)
    for column, (zero, lo, hi) in enumerate([(0, -128, 127), (-128, -128, 127), (131, 0, 255)]):
        with np.errstate(invalid="ignore"):
            want = np.where(np.isnan(x), lo, np.clip(np.rint(x.astype(np.float64)) + zero, lo, hi)).astype(np.int32)
        assert np.array_equal(got[:, column], want), column


FIXED_POINT_DRIVER = """#include <stdint.h>
#include <stdio.h>
{helpers}
int main(void)
{{
    int32_t v[3];
    while (fread(v, sizeof v, 1, stdin) == 1) {{
        const int32_t y[4] = {{cglow_high_mul_tfl(v[0], v[1]), cglow_divide_pot_tfl(v[0], v[2]),
                              cglow_times_pot_tfl(v[0], 1 + v[2] % 2), cglow_leading_zeros((uint32_t)v[0])}};
        fwrite(y, sizeof y, 1, stdout);
    }}
    return 0;
}}
"""


def test_tflite_fixed_point_helpers_round_as_gemmlowp():
    """The fixed-point primitives of TFLite's 8-bit softmax against exact rational arithmetic: the product a * b /
    2^31 rounded half up (INT32_MIN squared saturating), x / 2^e rounded half away from zero (e up to 34, past
    what a shift of an int32 takes), x * 2^e saturated, and the leading zero bits; ties made on purpose."""
    names = ("leading_zeros", "high_mul_tfl", "divide_pot_tfl", "times_pot_tfl")
    helpers = "\n".join((HELPERS / f"{n}.c").read_text() for n in names)
    program = build_cached({"fixed.c": FIXED_POINT_DRIVER.format(helpers=helpers)}, "cc", HOST_FLAGS, "fixed-{}")
    rng = np.random.default_rng(7)
    low = -2 ** 31
    rows = [(x, 1 << 30, e) for x in range(-40, 41) for e in range(0, 6)]
    rows += [(low, low, 0), (low, 2 ** 31 - 1, 31), (2 ** 31 - 1, 2 ** 31 - 1, 34), (0, low, 32), (2 ** 30, 7, 33)]
    rows += [(int(a), int(b), int(e)) for a, b, e in zip(rng.integers(low, 2 ** 31, 30000),
                                                         rng.integers(low, 2 ** 31, 30000), rng.integers(0, 35, 30000))]
    run = subprocess.run([str(program)], input=np.array(rows, "<i4").tobytes(), capture_output=True, check=True)
    got = np.frombuffer(run.stdout, "<i4").reshape(-1, 4)

    def half_away(q: Fraction) -> int:
        return int(math.copysign(math.floor(abs(q) + Fraction(1, 2)), q))
    for (a, b, e), (product, quotient, times, zeros) in zip(rows, got.tolist()):
        assert product == (2 ** 31 - 1 if a == b == low else math.floor(Fraction(a * b, 2 ** 31) + Fraction(1, 2)))
        assert quotient == half_away(Fraction(a, 2 ** e))
        assert times == min(max(a * 2 ** (1 + e % 2), low), 2 ** 31 - 1)
        assert zeros == 32 - (a % 2 ** 32).bit_length()


TFL_REQUANT_DRIVER = """#include <stdint.h>
#include <stdio.h>
{helpers}
int main(void)
{{
    int32_t v[4];
    while (fread(v, sizeof v, 1, stdin) == 1) {{
        const int32_t y[2] = {{cglow_requant_tfl(v[0], v[1], v[2], v[3], -128, 127),
                              cglow_requant_tfl_high(v[0], (int32_t)(2 * (int64_t)v[1] - 4294967296), -v[2], v[3],
                                                     -128, 127)}};
        fwrite(y, sizeof y, 1, stdout);
    }}
    return 0;
}}
"""


def test_tflite_requantizations_round_twice_as_litert():
    """cglow_requant_tfl and cglow_requant_tfl_high (its multiplier M given as 2M - 2^32, its shift negated)
    against exact rational arithmetic: MultiplyByQuantizedMultiplier's product rounded half up at 2^31, then
    divided by 2^r rounded half away from zero, plus the zero point, clamped. Power-of-two multipliers make
    ties on purpose; the ends of int32 and of the multipliers are taken. cglow_requant_tfl_high is taken where
    requantized() gives it (accumulators below 2^30, the zero point's term (1 + 2 zero) 2^(r-1) below 2^29),
    up to those edges."""
    names = ("clamp", "dsp", "scale_tfl", "requant_tfl", "requant_tfl_high")
    helpers = "\n".join((HELPERS / f"{n}.c").read_text() for n in names)
    program = build_cached({"tfl.c": TFL_REQUANT_DRIVER.format(helpers=helpers)}, "cc", HOST_FLAGS, "tfl-{}")
    rng = np.random.default_rng(8)
    low, top = -2 ** 31, 2 ** 31 - 1
    rows = [(a, 1 << 30, -r, z) for r in (1, 2, 5, 12, 31) for z in (-128, 0, 5) for a in range(-300, 300)]
    edges = (low, low + 1, -2 ** 30 + 1, -1, 0, 1, 2 ** 30 - 1, top)
    rows += [(a, m, -r, z) for a in edges for m in (1 << 30, top) for r in (1, 7, 20, 31) for z in (-128, 0, 127)]
    rows += [(int(a), int(m), -int(r), int(z)) for a, m, r, z in zip(
        rng.integers(low, top, 30000, endpoint=True), rng.integers(1 << 30, top, 30000, endpoint=True),
        rng.integers(1, 32, 30000), rng.integers(-128, 128, 30000))]
    run = subprocess.run([str(program)], input=np.array(rows, "<i4").tobytes(), capture_output=True, check=True)
    got = np.frombuffer(run.stdout, "<i4").reshape(-1, 2)

    def half_away(q: Fraction) -> int:
        return int(math.copysign(math.floor(abs(q) + Fraction(1, 2)), q))
    want = [min(127, max(-128, half_away(Fraction(math.floor(Fraction(a * m, 2 ** 31) + Fraction(1, 2)), 2 ** -s))
                         + z)) for a, m, s, z in rows]
    high = [tflite_high_fits(np.array([m]), np.array([s]), z, abs(a)) for a, m, s, z in rows]
    assert np.array_equal(got[:, 0], want)
    assert np.array_equal(got[high, 1], np.array(want)[high]) and sum(high) > 10000
    assert any(abs(1 + 2 * z) << (-s - 1) >= 1 << 28 for (_, _, s, z), h in zip(rows, high) if h)


LAYER_NORM_DRIVER = """#include <stdint.h>
#include <stdio.h>
{helpers}
int main(void)
{{
    int32_t v[3];
    while (fread(v, sizeof v, 1, stdin) == 1) {{
        const int32_t y[3] = {{cglow_inv_sqrt_tfl(v[0]), cglow_inv_sqrt_exp_tfl(v[0]),
                              cglow_scale_up_tfl(v[0], v[1], v[2])}};
        fwrite(y, sizeof y, 1, stdout);
    }}
    return 0;
}}
"""


def test_tflite_inverse_square_root_and_neon_product():
    """TFLite's integer layer normalization's inverse square root (a Q31 multiplier, divided by 2^s where its
    exponent s is positive) within 2^-19 of 1/sqrt(x) (five Newton steps from 1 leave 1.2e-6 at x = 2), from 2 to
    2^31 - 1 (every normalization: divisions by 4 from 2^29, shifts by pairs of bits below); and the fixed-point
    product of LiteRT's Neon lanes against exact rational arithmetic: x (shifted left, wrapping, for a positive
    shift) times the multiplier / 2^31 rounded half up, then divided by 2^-shift rounded half up again, ties made
    on purpose."""
    from cglow.emit_c.emit import runtime_helpers
    helpers = "\n".join(runtime_helpers({"cglow_inv_sqrt_tfl", "cglow_inv_sqrt_exp_tfl", "cglow_scale_up_tfl"}))
    program = build_cached({"norm.c": LAYER_NORM_DRIVER.format(helpers=helpers)}, "cc", HOST_FLAGS, "norm-{}")
    rng = np.random.default_rng(3)
    low = -2 ** 31
    xs = [2, 3, 4, 7, 8, 2 ** 27 - 1, 2 ** 27, 2 ** 29 - 1, 2 ** 29, 2 ** 30, 2 ** 31 - 1]
    xs += [int(x) for x in np.exp(rng.uniform(math.log(2), math.log(2 ** 31 - 1), 20000))]
    rows = [(x, 1 << 30, -(x % 8)) for x in range(-300, 301)] + [(x, 1 << 30, -1) for x in xs]
    rows += [(int(a), int(m), int(s)) for a, m, s in zip(rng.integers(low, 2 ** 31, 20000), rng.integers(
        2 ** 30, 2 ** 31, 20000), rng.integers(-20, 4, 20000))]
    run = subprocess.run([str(program)], input=np.array(rows, "<i4").tobytes(), capture_output=True, check=True)
    got = np.frombuffer(run.stdout, "<i4").reshape(-1, 3)
    for (x, multiplier, shift), (inverse, exponent, product) in zip(rows, got.tolist()):
        if x >= 2:
            assert abs(Fraction(inverse, 2 ** (31 + max(exponent, 0))) * math.sqrt(x) - 1) < 2 ** -19, x
        shifted = (x << max(shift, 0)) % 2 ** 32
        shifted -= 2 ** 32 if shifted >= 2 ** 31 else 0
        high = math.floor(Fraction(shifted * multiplier, 2 ** 31) + Fraction(1, 2))
        assert product == math.floor(Fraction(high, 2 ** max(-shift, 0)) + Fraction(1, 2)), (x, multiplier, shift)
