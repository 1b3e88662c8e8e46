"""Seeded float32 ONNX builders for the MLPerf Tiny reference models plus a small transformer."""

from collections.abc import Callable

import onnx

from . import autoencoder, kws, resnet8, transformer, vww

MODELS: dict[str, Callable[[int], onnx.ModelProto]] = {
    "kws": kws.build,
    "vww": vww.build,
    "resnet8": resnet8.build,
    "autoencoder": autoencoder.build,
    "transformer": transformer.build,
}


def build(name: str, seed: int = 0) -> onnx.ModelProto:
    """Build zoo model `name` with weights drawn from np.random.default_rng(seed)."""
    if name not in MODELS:
        raise ValueError(f"unknown zoo model {name!r}; expected one of {sorted(MODELS)}")
    return MODELS[name](seed)
