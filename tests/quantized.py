"""Quantized test models as onnxruntime's quantizer makes them (quantize_static, QDQ and QOperator formats,
per-channel on and off, with and without its pre-processing), and the comparison of cglow's integers with
onnxruntime running the same model: quantization steps off, element by element (steps_off; int8_steps_off for
a hand-built model of one int8 input); the kernels of a compiled model that write floats."""
from __future__ import annotations

import functools

import numpy as np
import onnx
from onnx import helper

import cglow
from cglow import zoo
from cglow.tools.reference import ort_quantized
from tests.util import ort_run

SAMPLES = 8  # calibration inputs: seeded normal noise


@functools.lru_cache(maxsize=None)
def quantized(name: str, fmt: str, per_channel: bool, prepare: bool = True) -> onnx.ModelProto:
    """zoo model `name` quantized by onnxruntime (int8 activations and weights)."""
    return ort_quantized(zoo.build(name), fmt == "qdq", per_channel, prepare, SAMPLES)


def _input(model: onnx.ModelProto):
    value = model.graph.input[0]
    return value.name, tuple(d.dim_value for d in value.type.tensor_type.shape.dim)


def _exposed(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """The model with the named tensors as extra graph outputs."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names)
    return out


def steps_off(model: onnx.ModelProto, inputs: int = 4, seed: int = 1,
              optimized: bool = True) -> tuple[np.ndarray, cglow.CompiledModel]:
    """|cglow - onnxruntime| in quantization steps over every output element of `inputs` random inputs.
    cglow takes and gives the integers (the default API of a quantized model); onnxruntime runs the model
    as it is (with its graph optimizations, or none), and its integers are read where the model quantizes
    its input and before it dequantizes its output. A float output is compared in steps of the scale it was
    last dequantized from."""
    import onnxruntime as ort
    compiled = cglow.compile_model(model, name="net")
    net = cglow.build(compiled)
    producer = {o: n for n in model.graph.node for o in n.output}
    readers = {i: n for n in model.graph.node for i in n.input}
    seen_in = [readers[t.name].output[0] if t.scale is not None else t.name for t in compiled.inputs]
    seen_out = [producer[t.name].input[0] if t.scale is not None else t.name for t in compiled.outputs]
    exposed = _exposed(model, [n for n in seen_in + seen_out if n not in {o.name for o in model.graph.output}])
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(exposed.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    input_name, shape = _input(model)
    rng = np.random.default_rng(seed)
    off = []
    for _ in range(inputs):
        values = dict(zip(names, session.run(None, {input_name: rng.standard_normal(shape).astype(np.float32)})))
        ours = net(*[values[n] if t.scale is not None else values.get(n, None) for n, t in zip(seen_in, compiled.inputs)])
        for y, n, t in zip(ours, seen_out, compiled.outputs):
            scale = 1.0 if t.scale is not None else _last_scale(model, producer, n)
            off.append((np.abs(y.astype(np.float64) - values[n].astype(np.float64)) / scale).reshape(-1))
    return np.concatenate(off), compiled


def _last_scale(model: onnx.ModelProto, producer: dict, name: str) -> float:
    """The scale of the DequantizeLinear nearest upstream of a float output."""
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    todo = [name]
    while todo:
        node = producer.get(todo.pop(0))
        if node is None:
            continue
        if node.op_type == "DequantizeLinear":
            return float(consts[node.input[1]].reshape(-1).max())
        todo += list(node.input)
    raise AssertionError(f"no DequantizeLinear above {name}")


def float_kernels(compiled: cglow.CompiledModel) -> list[str]:
    """The kernels that write float values."""
    buffers = compiled.program.buffers
    return [type(i).__name__ for i in compiled.program.instrs if buffers[i.out.buf].dtype == np.float32]


def int8_steps_off(model, compiled, inputs: int = 4) -> int:
    """The largest |cglow - onnxruntime| over seeded int8 inputs of a model of one int8 input named "input" and
    one int8 output, in steps of the output."""
    net = cglow.build(compiled)
    rng = np.random.default_rng(1)
    worst = 0
    for _ in range(inputs):
        x = rng.integers(-128, 128, compiled.inputs[0].shape).astype(np.int8)
        (got,) = net(x)
        (want,) = ort_run(model, {"input": x})
        worst = max(worst, int(np.abs(got.astype(np.int64) - want).max()))
    return worst
