"""Random signal nodes: DFT (opset 20: axis and dft_length as inputs) of a real or complex signal, forward or
inverse, one-sided; STFT with a Hann, Hamming or Blackman window or none; a MelWeightMatrix applied by a MatMul.
Sizes stay small (a transform of n samples sums n products), so that float32 rounding stays within the
differential check's tolerance."""
from __future__ import annotations

import numpy as np

from .builder import Builder, Value
from .tensors import ints


def _signal(b: Builder, x: Value, complex_: bool) -> str:
    """x [...] as a real signal [..., 1], or with an imaginary part of constants, [..., 2]."""
    (real,) = b.node("Unsqueeze", [x.name, b.const(ints([-1]))])
    if not complex_:
        return real.name
    return b.node("Concat", [real.name, b.weights(*real.shape)], axis=-1)[0].name


def dft(b: Builder) -> None:
    """DFT along any axis of a signal but its last (0 too), cut or padded to a dft_length or not; one-sided of a
    real signal, or inversely of half a complex spectrum to a real signal (then of a length that reads every
    frequency given, 2 (n - 1) or one more: for a shorter one onnxruntime computes something else than ONNX's
    reference and NumPy's irfft)."""
    x = b.pick(lambda v: v.rank in (2, 3) and max(v.shape) <= 12)
    complex_ = b.chance(0.4)
    signal = _signal(b, x, complex_)
    axis = b.int(0, x.rank - 1)
    n = x.shape[axis]
    inverse = b.int(0, 1)
    onesided = b.int(0, 1) if complex_ == bool(inverse) else 0
    if onesided and inverse:  # of one frequency, the default length 2 (n - 1) is 0
        length = b.const(ints(2 * (n - 1) + b.int(n == 1, 1))) if n == 1 or b.chance(0.5) else ""
    else:
        length = b.const(ints(b.int(1, n + 3))) if b.chance(0.5) else ""
    axis_input = b.const(ints(axis - x.rank - 1 if b.chance(0.3) else axis)) if b.chance(0.7) or \
        axis != x.rank - 1 else ""  # -2, the default
    inputs = [signal, length, axis_input]
    while not inputs[-1]:
        inputs.pop()
    b.node("DFT", inputs, inverse=inverse, onesided=onesided)


def stft(b: Builder) -> None:
    """STFT of a value [batch, n] (a real signal [batch, n, 1]; or complex, two-sided), frames of a window's
    length or of a frame_length, every frame_step samples."""
    x = b.pick(lambda v: v.rank == 2 and 2 <= v.shape[1] <= 16)
    complex_ = b.chance(0.3)
    signal = _signal(b, x, complex_)
    length = b.int(1, x.shape[1])
    inputs = [signal, b.const(ints(b.int(1, 3)))]
    if b.chance(0.7) and length > 1:  # a symmetric window of 1 divides 0 by 0
        op = b.choice(["HannWindow", "HammingWindow", "BlackmanWindow"])
        (window,) = b.node(op, [b.const(ints(length))], periodic=b.int(0, 1))
        inputs.append(window.name)
        if b.chance(0.3):
            inputs.append(b.const(ints(length)))
    else:
        inputs += ["", b.const(ints(length))]
    b.node("STFT", inputs, onesided=0 if complex_ else b.int(0, 1))


def mel_weights(b: Builder) -> None:
    """A value [..., bins] times a MelWeightMatrix of bins = dft_length / 2 + 1 rows."""
    x = b.pick(lambda v: v.rank >= 1 and v.shape[-1] >= 2)
    length = 2 * (x.shape[-1] - 1) + b.int(0, 1)
    rate = b.choice([8000, 16000, 22050])
    low = b.uniform(0, 500)
    inputs = [b.const(ints(b.int(1, 6))), b.const(ints(length)), b.const(ints(rate)),
              b.const(np.float32(low)), b.const(np.float32(b.uniform(low + 500, rate / 2)))]
    (mel,) = b.node("MelWeightMatrix", inputs)
    b.node("MatMul", [x.name, mel.name])


GENERATORS = [(dft, 2), (stft, 1), (mel_weights, 1)]
