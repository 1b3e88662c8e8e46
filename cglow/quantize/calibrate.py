"""Calibration: the calibration inputs checked, the float model run on each sample, and the range [lo, hi]
of every tensor that will be quantized.

Methods (every range includes 0):
- minmax: the smallest and largest value over all samples.
- percentile: a symmetric clip at t, the given percentile of |x| over all values of all samples (from a
  histogram of |x| with 2048 bins over [0, max |x|], t the upper edge of the bin where that percentile
  falls); the range is [max(min, -t), min(max, t)]. 100 gives the min/max range.
- entropy: the same clip, t chosen among the histogram's bin edges to minimize the KL divergence between
  the distribution of |x| clipped at t (what lies beyond t counted in the last bin) and that distribution
  quantized to as many levels as int8 gives |x| below t (128 for a tensor with both signs, 255 for one
  sign): the bins below t are merged into that many groups, and each group's count spread evenly over its
  bins that hold values, the clipped values left out. A bin that holds values where the quantized
  distribution has none gets probability 1e-9 there, not 0, so that the divergence stays finite.

Histogram methods take two passes over the samples: the first finds max |x|, the second fills the bins. The
histograms leave exact zeros out: int8 represents 0 exactly, and the zeros of a ReLU output (half its
values) would otherwise pile up in the first bin, where merging bins costs the most divergence, and pull the
entropy threshold down to the first few hundred bins."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from ..errors import CglowError, reason

METHODS = ("minmax", "percentile", "entropy")
BINS = 2048
FLOOR = 1e-9


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The model's run-time inputs (not those an initializer gives a default)."""
    init = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in init]


def load_calibration(path: str | Path, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The calibration inputs of `model` from a .npz file: one array per graph input, named after it (any name
    when the model has one input), each S samples stacked on a new leading axis."""
    if not Path(path).is_file():
        raise CglowError(f"{path}: no such file")
    try:
        loaded = np.load(path, allow_pickle=False)
        arrays = {}
        if isinstance(loaded, np.lib.npyio.NpzFile):  # not a single .npy array
            with loaded as npz:
                arrays = {name: npz[name] for name in npz.files}
    except Exception as exc:  # NumPy raises several unrelated types for a bad file
        raise CglowError(f"{path}: not a readable .npz file of arrays ({reason(exc)})") from None
    if not arrays:
        raise CglowError(f"{path}: expected a .npz file holding one array per model input")
    inputs = graph_inputs(model)
    if len(inputs) == 1 and len(arrays) == 1:
        arrays = {inputs[0].name: next(iter(arrays.values()))}
    return check_calibration(arrays, model, f"{path}: ")


def check_calibration(calib: dict[str, np.ndarray], model: onnx.ModelProto, where: str = "") -> dict[str, np.ndarray]:
    """`calib` checked against the model's inputs: the same names, arrays of S >= 1 samples of each input's
    shape (any size where a dimension is symbolic) and element type."""
    inputs = graph_inputs(model)
    names = [v.name for v in inputs]
    unknown = sorted(set(calib) - set(names))
    missing = [n for n in names if n not in calib]
    if unknown or missing:
        raise CglowError(where + "; ".join(
            ([f"no model input named {', '.join(map(repr, unknown))}"] if unknown else []) +
            ([f"no calibration data for input {', '.join(map(repr, missing))}"] if missing else [])) +
            f" (the model's inputs: {', '.join(map(repr, names))})")
    counts = set()
    for v in inputs:
        x = np.asarray(calib[v.name])
        dims = [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)
        shape_ok = x.ndim == len(dims) + 1 and x.shape[0] >= 1 and \
            all(d is None or d == n for d, n in zip(dims, x.shape[1:]))
        if not shape_ok or x.dtype != dtype:
            wanted = ",".join("?" if d is None else str(d) for d in dims)
            raise CglowError(f"{where}input {v.name!r}: expected {dtype} samples of shape (S,{wanted}) with S >= 1, "
                             f"got {x.dtype} of shape {x.shape}")
        counts.add(x.shape[0])
    if len(counts) > 1:
        raise CglowError(f"{where}the inputs have different numbers of samples ({sorted(counts)})")
    return {n: np.asarray(calib[n]) for n in names}


def collect_ranges(model: onnx.ModelProto, calib: dict[str, np.ndarray], names: list[str],
                   method: str = "minmax", percentile: float = 99.99) -> dict[str, tuple[float, float]]:
    """The range of each tensor in `names` (graph inputs or outputs of a typed model's nodes), `model` run on
    every sample of the checked calibration inputs."""
    run = _runner(model, names)
    count = len(next(iter(calib.values())))
    return ranges(lambda i: run({n: x[i] for n, x in calib.items()}), count, method, percentile)


def ranges(sample: Callable[[int], dict[str, np.ndarray]], count: int, method: str = "minmax",
           percentile: float = 99.99) -> dict[str, tuple[float, float]]:
    """The range of each tensor that sample(i) returns, over samples 0 .. count-1, by `method`."""
    check_method(method, percentile)
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    for i in range(count):
        for name, x in sample(i).items():
            x = _finite(x)
            lo[name] = min(lo.get(name, 0.0), float(x.min(initial=0.0)))
            hi[name] = max(hi.get(name, 0.0), float(x.max(initial=0.0)))
    if method == "minmax":
        return {n: (lo[n], hi[n]) for n in lo}
    amax = {n: max(-lo[n], hi[n]) for n in lo}
    hist = {n: np.zeros(BINS, np.int64) for n in lo}
    for i in range(count):
        for name, x in sample(i).items():
            if amax[name] > 0:
                x = np.abs(_finite(x))
                hist[name] += np.histogram(x[x > 0], BINS, (0.0, amax[name]))[0]
    result = {}
    for n in lo:
        width = amax[n] / BINS
        if method == "percentile":
            t = percentile_threshold(hist[n], percentile) * width
        else:
            t = entropy_threshold(hist[n], 128 if lo[n] < 0 < hi[n] else 255) * width
        result[n] = (max(lo[n], -t), min(hi[n], t))
    return result


def check_method(method: str, percentile: float) -> None:
    if method not in METHODS:
        raise CglowError(f"unknown calibration method {method!r}; expected one of {', '.join(METHODS)}")
    if not 0 < percentile <= 100:
        raise CglowError(f"percentile {percentile}: expected a number above 0 and at most 100")


def percentile_threshold(hist: np.ndarray, percentile: float) -> int:
    """The number of bins, from the first, that hold `percentile` % of the histogram's values."""
    cumulative = np.cumsum(hist)
    if cumulative[-1] == 0:
        return len(hist)
    return int(np.searchsorted(cumulative, cumulative[-1] * percentile / 100)) + 1


def entropy_threshold(hist: np.ndarray, levels: int) -> int:
    """The number of bins i (levels <= i <= len(hist)) that minimizes KL(P_i || Q_i): P_i the first i bins,
    the rest's count added to the last; Q_i the first i bins merged into `levels` groups and spread back."""
    hist = hist.astype(np.float64)
    total = hist.sum()
    if total == 0 or len(hist) <= levels:
        return len(hist)
    beyond = np.concatenate([np.cumsum(hist[::-1])[::-1][1:], [0.0]])  # beyond[j]: the count after bin j
    best, best_kl = len(hist), np.inf
    for i in range(levels, len(hist) + 1):
        p = hist[:i].copy()
        p[-1] += beyond[i - 1]
        held = p > 0
        group = np.arange(i) * levels // i
        spread = np.bincount(group, hist[:i], levels) / np.maximum(np.bincount(group, held, levels), 1)
        q = np.maximum(spread[group][held], FLOOR * total)
        kl = float(np.sum(p[held] * np.log(p[held] / q))) / total
        if kl < best_kl:
            best, best_kl = i, kl
    return best


def _finite(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x if np.isfinite(x).all() else x[np.isfinite(x)]


def _runner(model: onnx.ModelProto, names: list[str]) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """A function from one sample's inputs to the tensors `names`: onnxruntime on one thread when it is
    installed and takes the model, else the ONNX reference evaluator."""
    inputs = {v.name for v in graph_inputs(model)}
    fetch = [n for n in dict.fromkeys(names) if n not in inputs]
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    outputs = {v.name for v in probe.graph.output}
    typed = {v.name: v for v in (*probe.graph.value_info, *probe.graph.output)}
    probe.graph.output.extend(typed[n] for n in fetch if n not in outputs)
    run = _onnxruntime(probe)
    if run is None:
        from onnx.reference import ReferenceEvaluator
        try:
            run = ReferenceEvaluator(probe).run
        except Exception as exc:
            raise CglowError(f"cannot run the float model to calibrate it ({reason(exc)})") from None

    def sample(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            values = run(fetch, feeds) if fetch else []
        except Exception as exc:
            raise CglowError(f"running the float model on a calibration sample fails ({reason(exc)})") from None
        return {**{n: feeds[n] for n in names if n in inputs}, **dict(zip(fetch, values))}
    return sample


def _onnxruntime(model: onnx.ModelProto) -> Callable | None:
    """onnxruntime's run on one thread; None when it is not installed or refuses the model (an IR version or
    an op it does not have)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 4
    try:
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run
    except Exception:  # onnxruntime raises its own Fail, InvalidGraph, NotImplemented...
        return None
