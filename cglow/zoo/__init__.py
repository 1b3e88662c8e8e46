"""Seeded float32 ONNX builders for the MLPerf Tiny reference models, a small transformer, MobileNetV2,
a U-Net, GRU (one way and bidirectional) and LSTM keyword spotters, an Inception-style classifier, a
MobileViT-class network, a scaled-down Inception-v1 (GoogLeNet, with its LRNs) and an EfficientNet-style network
(squeeze-and-excitation, SiLU)."""

from collections.abc import Callable

import onnx

from . import (autoencoder, bigru_kws, efficientnet, googlenet, gru_kws, inception, kws, lstm_kws, mobilenetv2,
               mobilevit, resnet8, transformer, unet, vww)

MODELS: dict[str, Callable[[int], onnx.ModelProto]] = {
    "kws": kws.build,
    "vww": vww.build,
    "resnet8": resnet8.build,
    "autoencoder": autoencoder.build,
    "transformer": transformer.build,
    "mobilenetv2": mobilenetv2.build,
    "unet": unet.build,
    "gru_kws": gru_kws.build,
    "lstm_kws": lstm_kws.build,
    "bigru_kws": bigru_kws.build,
    "inception": inception.build,
    "mobilevit": mobilevit.build,
    "googlenet": googlenet.build,
    "efficientnet": efficientnet.build,
}


def build(name: str, seed: int = 0) -> onnx.ModelProto:
    """Build zoo model `name` with weights drawn from np.random.default_rng(seed)."""
    if name not in MODELS:
        raise ValueError(f"unknown zoo model {name!r}; expected one of {sorted(MODELS)}")
    return MODELS[name](seed)
