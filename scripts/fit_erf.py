"""Derives the coefficients of runtime_c/erf.c: erf(x) ~ x * P(x^2) / Q(x^2) on [0, 3.92], P of degree
4 and Q of degree 5 in x^2 with Q(0) = 1, by linearized least squares (erf * Q - x * P = 0) reweighted by
1 / Q until it settles; prints them and the largest error of the float32 evaluation over [-6, 6]."""
from math import erf

import numpy as np

LIMIT, P_TERMS, Q_TERMS = 3.92, 5, 5


def fit() -> tuple[np.ndarray, np.ndarray]:
    xs = np.concatenate([(1 - np.cos(np.linspace(0, np.pi, 4000))) * LIMIT / 2, np.linspace(0, LIMIT, 4000)])
    ys, t = np.array([erf(v) for v in xs]), xs * xs
    weight = np.ones_like(xs)
    for _ in range(8):
        a = np.hstack([np.stack([xs * t ** k for k in range(P_TERMS)], 1),
                       -np.stack([ys * t ** k for k in range(1, Q_TERMS + 1)], 1)])
        coef = np.linalg.lstsq(a * weight[:, None], ys * weight, rcond=None)[0]
        p, q = coef[:P_TERMS], np.concatenate([[1.0], coef[P_TERMS:]])
        weight = 1 / np.abs(np.polyval(q[::-1], t))
    return p.astype(np.float32), q.astype(np.float32)


def evaluate(p: np.ndarray, q: np.ndarray, x: np.ndarray) -> np.ndarray:
    c = np.clip(x, -LIMIT, LIMIT).astype(np.float32)
    t = c * c
    return c * np.polyval(p[::-1], t).astype(np.float32) / np.polyval(q[::-1], t).astype(np.float32)


if __name__ == "__main__":
    p, q = fit()
    grid = np.linspace(-6, 6, 200001).astype(np.float32)
    error = np.max(np.abs(evaluate(p, q, grid) - np.array([erf(float(v)) for v in grid])))
    print("P:", ", ".join(f"{c:.9g}" for c in p))
    print("Q:", ", ".join(f"{c:.9g}" for c in q))
    print(f"largest error on [-6, 6]: {error:.2g}")
