"""What comparing cglow's C with a reference runtime needs: the runtime (onnxruntime on one thread, or the ONNX
reference evaluator when onnxruntime is not installed), seeded inputs, the real values of quantized tensors,
the differences between two outputs, and models quantized by onnxruntime's own quantizer."""
from __future__ import annotations

from dataclasses import dataclass, replace
import math
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

from ..errors import CglowError, reason

TOLERANCE = 1e-4  # a float output's largest difference from the reference over its scale (scale_of)
MAX_STEPS = 2     # a quantized output's largest difference, in quantization steps (rounding differs in places)

if TYPE_CHECKING:
    import onnx

    from ..compiler import CompiledModel
    from ..emit_c.emit import TensorInfo


def ort_session(model: onnx.ModelProto):
    """An onnxruntime session on one thread: sequential execution, every graph optimization, CPU."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def ort_quantized(model: onnx.ModelProto, qdq: bool = True, per_channel: bool = True, prepare: bool = True,
                  samples: int = 8, seed: int = 0) -> onnx.ModelProto:
    """The model as onnxruntime's quantizer makes it: quant_pre_process (with `prepare`), then quantize_static to
    int8 activations and weights in the QDQ (or QOperator) format, calibrated (minmax) on `samples` seeded standard
    normal inputs. For a model with one input."""
    import logging
    from pathlib import Path
    import tempfile

    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice to pre-process
    value = model.graph.input[0]
    shape = tuple(d.dim_value for d in value.type.tensor_type.shape.dim)
    rng = np.random.default_rng(seed)
    feeds = [{value.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(samples)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.rest = iter(feeds)

        def get_next(self):
            return next(self.rest, None)

    with tempfile.TemporaryDirectory() as tmp:
        src, pre, out = Path(tmp, "float.onnx"), Path(tmp, "pre.onnx"), Path(tmp, "int8.onnx")
        onnx.save(model, src)
        if prepare:
            quant_pre_process(str(src), str(pre))
            src = pre
        quantize_static(str(src), str(out), Reader(), quant_format=QuantFormat.QDQ if qdq else QuantFormat.QOperator,
                        per_channel=per_channel, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
        return onnx.load(out)


def reference_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[str, list[np.ndarray]]:
    """The runtime's name and the model's outputs in graph order: onnxruntime when installed and able to run
    the model (it refuses IR versions newer than it knows), else the ONNX reference evaluator. A model neither
    can run is the user's problem (one line)."""
    refused = ""
    try:
        import onnxruntime
    except ImportError:
        pass
    else:
        try:
            outputs = ort_session(model).run(None, feeds)
            return f"onnxruntime {onnxruntime.__version__}", [np.asarray(y) for y in outputs]
        except Exception as exc:  # noqa: BLE001 - the runtime's own errors, of many types
            refused = f" (onnxruntime {onnxruntime.__version__} cannot run the model: {ort_reason(exc)})"
    from onnx.reference import ReferenceEvaluator
    try:
        outputs = ReferenceEvaluator(model).run(None, feeds)
    except Exception as exc:  # noqa: BLE001
        runtimes = "neither onnxruntime nor the ONNX reference evaluator can" if refused else \
            "the ONNX reference evaluator cannot"
        raise CglowError(f"{runtimes} run the model ({reason(exc)})") from None
    return f"the ONNX reference evaluator{refused}", [np.asarray(y) for y in outputs]


def ort_reason(exc: Exception) -> str:
    """What went wrong, from an onnxruntime error's first line (after where in its C++ source it did)."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    text = text.rsplit(") ", 1)[-1] if "onnxruntime::" in text else text
    return text if len(text) <= 120 else "..." + text[-117:]


def seeded_inputs(compiled: CompiledModel, seed: int = 0) -> list[np.ndarray]:
    """Inputs drawn in input order from one seeded generator: floats standard normal, quantized integers
    uniform over their type, other integers and bools zero (always valid indices, counts and masks)."""
    rng = np.random.default_rng(seed)
    inputs = []
    for t in compiled.inputs:
        if np.issubdtype(t.dtype, np.floating):
            inputs.append(rng.standard_normal(t.shape).astype(t.dtype))
        elif t.scale is not None:
            limits = np.iinfo(t.dtype)
            inputs.append(rng.integers(limits.min, limits.max, t.shape, endpoint=True).astype(t.dtype))
        else:
            inputs.append(np.zeros(t.shape, t.dtype))
    return inputs


def real_values(info: TensorInfo, values: np.ndarray) -> np.ndarray:
    """A quantized input's or output's real values (what the ONNX model computes with); others unchanged."""
    if info.scale is None:
        return values
    return ((values.astype(np.float64) - info.zero_point) * info.scale).astype(np.float32)


def _eight_bit(dtype: np.dtype) -> bool:
    return dtype.itemsize == 1 and dtype.kind in "iu"


def _declared(model: onnx.ModelProto, name: str) -> np.dtype:
    """The element type the ONNX model declares for a graph input or output."""
    from onnx import helper
    value = next(v for v in list(model.graph.input) + list(model.graph.output) if v.name == name)
    return np.dtype(helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))


def _model_quantization(model: onnx.ModelProto, name: str) -> tuple[float, int] | None:
    """The scale and zero point of the DequantizeLinear that reads an 8-bit graph input, or of the
    QuantizeLinear that writes an 8-bit graph output: constants of the model (cglow's C with float I/O
    converts there)."""
    from onnx import helper, numpy_helper
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    consts.update((n.output[0], numpy_helper.to_array(helper.get_attribute_value(a))) for n in model.graph.node
                  if n.op_type == "Constant" for a in n.attribute if a.name == "value")
    for node in model.graph.node:
        reads = node.op_type == "DequantizeLinear" and node.input[0] == name
        writes = node.op_type == "QuantizeLinear" and name in node.output
        if reads or writes:
            scale = consts.get(node.input[1])
            zero = consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else np.zeros(1)
            if scale is not None and zero is not None and scale.size == 1 == zero.size:
                return float(scale.reshape(-1)[0]), int(zero.reshape(-1)[0])
    return None


def reference_feed(model: onnx.ModelProto, info: TensorInfo, values: np.ndarray) -> np.ndarray:
    """An input of cglow's C as the ONNX model takes it: the real values of a quantized input where the model
    takes floats (it quantizes them itself), the integers where it takes 8-bit ones, and those integers
    quantized from the floats of a C with float I/O."""
    dtype = _declared(model, info.name)
    if np.issubdtype(dtype, np.floating):
        return real_values(info, values)
    if values.dtype == dtype:
        return values
    scale, zero = _model_quantization(model, info.name)
    limits = np.iinfo(dtype)
    return np.clip(np.rint(values / np.float32(scale)) + zero, limits.min, limits.max).astype(dtype)


def reference_feeds(model: onnx.ModelProto, compiled: CompiledModel,
                    inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """The inputs of cglow's C as the reference's feeds (reference_feed)."""
    return {t.name: reference_feed(model, t, x) for t, x in zip(compiled.inputs, inputs)}


def scale_of(want: np.ndarray) -> float:
    """A tensor's scale: its largest finite magnitude, at least the smallest normal float32. An error is judged
    against it however small the tensor is: outputs of 1e-14 (a deep random-weight network) pass no error of
    1e-10, where a floor such as 1e-6 would pass almost any."""
    finite = np.abs(want[np.isfinite(want)]).astype(np.float64)
    return max(float(np.max(finite, initial=0.0)), float(np.finfo(np.float32).tiny))


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    """The largest absolute difference over the reference's scale (scale_of); inf when the shapes differ or
    the reference's NaNs and infinities are not where cglow's are."""
    if got.shape != want.shape:
        return math.inf
    if not want.size:
        return 0.0
    got, want = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(want)
    if not np.array_equal(got[~finite], want[~finite], equal_nan=True):
        return math.inf
    return float(np.max(np.abs(got[finite] - want[finite]), initial=0.0)) / scale_of(want)


@dataclass(frozen=True)
class Difference:
    """How far one of cglow's tensors is from the reference's, in the model's real values."""
    absolute: float             # the largest |cglow - reference|
    relative: float             # that over the reference's scale (rel_error)
    scale: float                # the reference's scale (scale_of)
    steps: float | None = None  # a quantized tensor: the absolute difference in quantization steps
    precision: float = 0.0      # a tensor of a float type narrower than float32: its step at 1 (float16's 2^-10)

    def ok(self, tolerance: float = TOLERANCE, max_steps: float = MAX_STEPS) -> bool:
        """Within max_steps for a quantized tensor, within `tolerance` of the scale (or one step of a narrower
        float type at the scale, where that is more) for any other."""
        if self.steps is not None:
            return self.steps <= max_steps
        return self.relative <= max(tolerance, self.precision)

    def text(self) -> str:
        """The absolute error, the scale and their ratio (and the quantization steps)."""
        steps = "" if self.steps is None else f" ({self.steps:.3g} quantization steps)"
        return (f"max abs error {self.absolute:.3g}{steps}, scale {self.scale:.3g}, "
                f"error {self.relative:.3g} of the scale")


def float_difference(got: np.ndarray, want: np.ndarray) -> Difference:
    """Real values `got` against the reference's `want`: the largest absolute difference where the reference is
    finite, that over its scale (rel_error), the scale."""
    rel = rel_error(got, want)
    scale = scale_of(want) if want.size else 0.0
    if math.isinf(rel) or not want.size:
        return Difference(rel, rel, scale)
    finite = np.isfinite(want)
    narrow = want.dtype.kind == "V" or want.dtype.kind == "f" and want.dtype.itemsize < 4  # ml_dtypes' floats: "V"
    precision = float(ml_dtypes.finfo(want.dtype).eps) if narrow else 0.0
    return Difference(float(np.max(np.abs(got[finite].astype(np.float64) - want[finite]), initial=0.0)), rel, scale,
                      precision=precision)


def difference(model: onnx.ModelProto, info: TensorInfo, got: np.ndarray, want: np.ndarray) -> Difference:
    """cglow's output `got` (described by `info`) against the reference's `want`, in real values; for an
    8-bit output (of cglow's C or of the model) also in its quantization steps: those of its scale and zero
    point (the C's, else the QuantizeLinear's that writes it in the model), else integer steps."""
    quant = (info.scale, info.zero_point) if info.scale is not None else None
    if quant is None and _eight_bit(want.dtype):
        quant = _model_quantization(model, info.name) or (1.0, 0)
    if quant is None:
        return float_difference(got, want)

    def real(x: np.ndarray) -> np.ndarray:
        return x if x.dtype.kind == "f" else ((x.astype(np.float64) - quant[1]) * quant[0]).astype(np.float32)
    d = float_difference(real(got), real(want))
    return replace(d, steps=d.absolute / quant[0])
