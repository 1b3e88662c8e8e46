"""The tutorial's small CNN (docs/tutorial.md) built with onnx.helper, as torch.onnx.export writes it:
Conv, Relu, MaxPool twice, Flatten and Gemm (nn.Linear), seeded weights."""
from __future__ import annotations

import numpy as np
import onnx

from cglow.zoo._helpers import Builder


def small_cnn(seed: int = 0) -> onnx.ModelProto:
    """[1,1,28,28] -> 10 logits."""
    b = Builder(seed)
    x = "input"
    for i, (cin, cout) in enumerate(((1, 8), (8, 16)), 1):
        x = b.act(b.conv(x, f"conv{i}", cin, cout, 3), f"conv{i}", "relu")
        x = b.node("MaxPool", [x], f"pool{i}", kernel_shape=[2, 2], strides=[2, 2])
    b.dense(b.node("Flatten", [x], "flatten"), "fc", 16 * 7 * 7, 10, form="gemm_transb")
    return b.model("small_cnn", [1, 1, 28, 28], [1, 10])


def calibration(samples: int = 8, seed: int = 1) -> dict[str, np.ndarray]:
    """Calibration inputs for `cglow emit --int8 --calib`: samples stacked on a new leading axis."""
    return {"input": np.random.default_rng(seed).uniform(0.0, 1.0, (samples, 1, 1, 28, 28)).astype(np.float32)}
