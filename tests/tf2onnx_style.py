"""int8 dense networks as tf2onnx writes a fully-integer TFLite model: each FULLY_CONNECTED layer becomes
DequantizeLinear -> MatMul -> Add (an int32 bias through a DequantizeLinear at scale a_scale * w_scale) ->
Relu -> QuantizeLinear, the model's input and output int8 tensors read by a DequantizeLinear and written by a
QuantizeLinear. Scales are calibrated on seeded inputs; weights are seeded."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MLPERF_AUTOENCODER = (640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640)


def dense_int8(sizes=MLPERF_AUTOENCODER, per_column: bool = True, float_bias: bool = False,
               seed: int = 0) -> onnx.ModelProto:
    """Dense layers of `sizes` (Relu after all but the last); weights per column (axis 1 of the [K, N] matrix)
    or per tensor; the bias an int32 constant through DequantizeLinear, or (`float_bias`) a float constant."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    x = rng.standard_normal((256, sizes[0])).astype(np.float32)  # the calibration set
    scale, zero = float(np.abs(x).max() / 127), 0
    nodes.append(helper.make_node("DequantizeLinear", ["input", const("input_scale", np.float32(scale)),
                                                       const("input_zero", np.int8(zero))], ["input_dq"]))
    value = "input_dq"
    real = (np.clip(np.rint(x / scale), -128, 127) - zero) * scale
    for i, (k, n) in enumerate(zip(sizes, sizes[1:])):
        layer, last = f"dense_{i}", i == len(sizes) - 2
        w = rng.integers(-127, 128, (k, n)).astype(np.int8)
        w_scale = (rng.uniform(0.5, 1.5, n) / (127 * np.sqrt(k)) * 2).astype(np.float32)
        if not per_column:
            w_scale = np.float32(w_scale.mean())
        acc_scale = (np.float32(scale) * w_scale).astype(np.float32)
        bias = rng.integers(-3000, 3000, n).astype(np.int32)
        w_dq = helper.make_node("DequantizeLinear", [const(f"{layer}/w", w), const(f"{layer}/w_scale", w_scale),
                                                     const(f"{layer}/w_zero", np.zeros_like(w_scale, np.int8))],
                                [f"{layer}/w_dq"], axis=1)
        if float_bias:
            bias_real = (bias * acc_scale).astype(np.float32)
            bias_value = const(f"{layer}/bias", bias_real)
            bias_nodes = []
        else:
            zero = np.zeros_like(acc_scale, np.int32)
            bias_nodes = [helper.make_node("DequantizeLinear", [const(f"{layer}/b", bias),
                                                                const(f"{layer}/b_scale", acc_scale),
                                                                const(f"{layer}/b_zero", zero)],
                                           [f"{layer}/b_dq"], **({"axis": 0} if per_column else {}))]
            bias_value, bias_real = f"{layer}/b_dq", bias * acc_scale.astype(np.float64)
        nodes += [w_dq, *bias_nodes,
                  helper.make_node("MatMul", [value, f"{layer}/w_dq"], [f"{layer}/mm"], name=layer),
                  helper.make_node("Add", [f"{layer}/mm", bias_value], [f"{layer}/add"], name=f"{layer}/BiasAdd")]
        out = f"{layer}/add"
        real = real @ (w.astype(np.float64) * w_scale) + bias_real
        if not last:
            nodes.append(helper.make_node("Relu", [out], [f"{layer}/relu"], name=f"{layer}/Relu"))
            out, real = f"{layer}/relu", np.maximum(real, 0)
            scale, zero = float(real.max() / 255), -128
        else:
            scale, zero = float(np.abs(real).max() / 127), 0
        q = "output" if last else f"{layer}/q"
        nodes.append(helper.make_node("QuantizeLinear", [out, const(f"{layer}/y_scale", np.float32(scale)),
                                                         const(f"{layer}/y_zero", np.int8(zero))], [q]))
        real = (np.clip(np.rint(real / scale) + zero, -128, 127) - zero) * scale
        if not last:
            nodes.append(helper.make_node("DequantizeLinear", [q, f"{layer}/y_scale", f"{layer}/y_zero"],
                                          [f"{layer}/dq"]))
            value = f"{layer}/dq"
    graph = helper.make_graph(nodes, "tf2onnx",
                              [helper.make_tensor_value_info("input", TensorProto.INT8, [1, sizes[0]])],
                              [helper.make_tensor_value_info("output", TensorProto.INT8, [1, sizes[-1]])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
