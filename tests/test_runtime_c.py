"""The runtime_c helpers on their own, against NumPy in double precision: cglow_exp and cglow_erf over
their whole float range, edges and NaN included, with the strict flags and with -ffast-math. Each helper
runs in a program of its own (floats in on stdin, out on stdout): a library built with -ffast-math would
set flush-to-zero for the whole test process when loaded."""
from __future__ import annotations

import subprocess
from importlib import resources

import numpy as np
import pytest

from cglow.host import HOST_FLAGS, build_cached

HELPERS = resources.files("cglow") / "runtime_c"
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


def helper(name: str, flags) -> callable:
    source = DRIVER.format(helper=(HELPERS / f"{name}.c").read_text(), name=name)
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


def test_erf_is_within_its_fit():
    from math import erf
    cglow_erf = helper("erf", HOST_FLAGS)
    x = spread(-6.0, 6.0)
    want = np.vectorize(erf)(x.astype(np.float64))
    assert np.max(np.abs(cglow_erf(x) - want)) <= 7e-7
    assert np.allclose(cglow_erf(np.array([-np.inf, np.inf], np.float32)), [-1.0, 1.0], rtol=0, atol=7e-7)
    assert np.isnan(cglow_erf(np.array([np.nan], np.float32))[0])
