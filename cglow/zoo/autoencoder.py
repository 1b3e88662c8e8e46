"""Anomaly-detection FC autoencoder (MLPerf Tiny): [1,640] spectrogram frames -> [1,640]."""

import onnx

from ._helpers import Builder

WIDTHS = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640]
FORMS = ["gemm_transb", "matmul", "gemm"]  # cycled over the layers to exercise every dense lowering


def build(seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    x = "input"
    layers = list(zip(WIDTHS, WIDTHS[1:]))
    for i, (fin, fout) in enumerate(layers):
        hidden = i < len(layers) - 1
        x = b.dense(x, f"dense{i}", fin, fout, gain=2.0 if hidden else 1.0, form=FORMS[i % len(FORMS)])
        if hidden:
            x = b.act(b.batchnorm(x, f"dense{i}/bn", fout), f"dense{i}", "relu")
    return b.model("autoencoder", [1, 640], [1, 640])
