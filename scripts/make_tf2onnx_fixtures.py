"""Writes tests/data/tf2onnx/: small Keras models with seeded weights as real tf2onnx writes them, for
tests/quant/test_tf2onnx_models.py.

Needs tensorflow and tf2onnx (`pip install tensorflow-cpu tf2onnx`), which cglow and its tests do not: the
tests read the files this script wrote, and neither the tests nor CI run it. Nothing is downloaded.

Four networks: a dense autoencoder (640 -> 16 -> 8 -> 16 -> 640, the MLPerf Tiny frame), a DS-CNN keyword
spotter on [49, 10, 1] MFCC features, a conv net with BatchNormalization, ReLU6, a max pool, a concatenation
and a residual add, and a Conv1D classifier of [64, 3] sensor frames with a global average pool. Each is written as
- NAME_int8.onnx: the fully-integer TFLite file (int8 weights, activations, input and output) that the
  TFLite converter makes with a seeded representative dataset, through tf2onnx's command line (--tflite,
  opset 13; the TFLite file itself is not kept: its batch is symbolic, which cglow's TFLite import does
  not take);
- NAME_int8_dequantized.onnx: the same with --dequantize (float weights and activations);
- NAME_uint8.onnx (conv_net): the TFLite file with uint8 input and output (int8 inside) through tf2onnx;
- NAME_float.onnx: the float Keras model through tf2onnx.convert.from_keras (a symbolic batch).
The same TensorFlow and tf2onnx versions write the same bytes again (seeds everywhere, and one Python hash
seed, which tf2onnx's value names depend on)."""
from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
import sys
import tempfile
from unittest import mock

if os.environ.get("PYTHONHASHSEED") != "0":  # tf2onnx names values in set order: one hash seed, one file
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402

# tf2onnx's optimizers walk sets of its graph nodes, hashed by address: which of two equal constants it keeps,
# and so the names in the file, changed from run to run. Hashed by name (a node's name never changes), the
# every run writes the same file.
tf2onnx.graph.Node.__hash__ = lambda node: hash(node.name)

OPSET = 13
CALIBRATION = 64  # representative samples


def _seeded(model: tf.keras.Model, seed: int) -> tf.keras.Model:
    """Every weight drawn from a seeded generator: kernels and biases around Glorot's scale, BatchNormalization's
    gamma, beta, mean and variance spread so that it is no identity."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        values = []
        for w in layer.weights:
            shape, name = tuple(w.shape), w.name
            if name in ("gamma", "moving_variance"):
                v = rng.uniform(0.5, 1.5, shape)
            elif name in ("beta", "moving_mean", "bias"):
                v = rng.normal(0.0, 0.1, shape)
            else:
                fan = np.prod(shape[:-1]) if len(shape) > 1 else 1
                v = rng.normal(0.0, np.sqrt(2.0 / max(fan, 1)), shape)
            values.append(v.astype(np.float32))
        layer.set_weights(values)
    return model


def autoencoder() -> tf.keras.Model:
    L = tf.keras.layers
    x = inp = L.Input((640,), name="input")
    for i, n in enumerate((16, 8, 16)):
        x = L.Dense(n, activation="relu", name=f"dense_{i}")(x)
    return tf.keras.Model(inp, L.Dense(640, name="dense_out")(x), name="autoencoder")


def ds_cnn() -> tf.keras.Model:
    L = tf.keras.layers
    x = inp = L.Input((49, 10, 1), name="input")
    x = L.Conv2D(32, (10, 4), strides=2, padding="same", use_bias=False, name="stem")(x)
    x = L.ReLU()(L.BatchNormalization(name="stem_bn")(x))
    for i in range(2):
        x = L.DepthwiseConv2D(3, padding="same", use_bias=False, name=f"dw{i}")(x)
        x = L.ReLU()(L.BatchNormalization(name=f"dw{i}_bn")(x))
        x = L.Conv2D(32, 1, use_bias=False, name=f"pw{i}")(x)
        x = L.ReLU()(L.BatchNormalization(name=f"pw{i}_bn")(x))
    x = L.AveragePooling2D(pool_size=(25, 5), name="pool")(x)
    x = L.Flatten()(x)
    return tf.keras.Model(inp, L.Dense(12, activation="softmax", name="fc")(x), name="ds_cnn")


def conv_net() -> tf.keras.Model:
    L = tf.keras.layers

    def block(x, n, name):
        x = L.Conv2D(n, 3, padding="same", use_bias=False, name=name)(x)
        return L.ReLU(6.0)(L.BatchNormalization(name=f"{name}_bn")(x))

    x = inp = L.Input((16, 16, 3), name="input")
    x = block(x, 8, "conv0")
    x = L.MaxPooling2D(2, name="pool0")(x)
    x = L.Concatenate(name="concat")([block(x, 8, "left"), block(x, 8, "right")])
    x = L.Add(name="residual")([x, block(x, 16, "conv1")])
    x = L.GlobalAveragePooling2D(name="gap")(x)
    x = L.Reshape((4, 4), name="reshape")(x)
    x = L.Flatten(name="flatten")(x)
    return tf.keras.Model(inp, L.Dense(10, name="fc")(x), name="conv_net")


def conv1d() -> tf.keras.Model:
    L = tf.keras.layers
    x = inp = L.Input((64, 3), name="input")
    x = L.Conv1D(8, 5, activation="relu", name="conv0")(x)
    x = L.MaxPooling1D(2, name="pool0")(x)
    x = L.Conv1D(16, 3, activation="relu", name="conv1")(x)
    x = L.GlobalAveragePooling1D(name="gap")(x)
    return tf.keras.Model(inp, L.Dense(4, activation="softmax", name="fc")(x), name="conv1d")


MODELS = {"autoencoder": (autoencoder, 1), "ds_cnn": (ds_cnn, 2), "conv_net": (conv_net, 3), "conv1d": (conv1d, 4)}
UINT8_IO = {"conv_net"}  # an image's pixels


def int8_tflite(model: tf.keras.Model, seed: int, io_type=tf.int8) -> bytes:
    rng = np.random.default_rng(seed + 100)
    shape = (1,) + tuple(model.inputs[0].shape[1:])

    def representative():
        for _ in range(CALIBRATION):
            yield [rng.standard_normal(shape).astype(np.float32)]

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = io_type
    converter.inference_output_type = io_type
    return converter.convert()


def from_tflite(path: Path, out: Path, dequantize: bool) -> None:
    """tf2onnx's command line on a TFLite file (its Python API has no dequantize option)."""
    argv = ["tf2onnx.convert", "--tflite", str(path), "--output", str(out), "--opset", str(OPSET)]
    with mock.patch.object(sys, "argv", argv + (["--dequantize"] if dequantize else [])):
        tf2onnx.convert.main()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "tests/data/tf2onnx")
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (make, seed) in MODELS.items():
        tf.keras.utils.set_random_seed(seed)
        model = _seeded(make(), seed)
        with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):  # tf2onnx writes the path in the file
            tflite = Path(f"{name}_int8.tflite")
            tflite.write_bytes(int8_tflite(model, seed))
            from_tflite(tflite, args.out / f"{name}_int8.onnx", dequantize=False)
            from_tflite(tflite, args.out / f"{name}_int8_dequantized.onnx", dequantize=True)
            if name in UINT8_IO:
                tflite.write_bytes(int8_tflite(model, seed, tf.uint8))
                from_tflite(tflite, args.out / f"{name}_uint8.onnx", dequantize=False)
        spec = (tf.TensorSpec((None,) + tuple(model.inputs[0].shape[1:]), tf.float32, name="input"),)
        tf2onnx.convert.from_keras(model, input_signature=spec, opset=OPSET,
                                   output_path=str(args.out / f"{name}_float.onnx"))
        print(name, *(f"{p.name} {p.stat().st_size}" for p in sorted(args.out.glob(f"{name}_*"))))


if __name__ == "__main__":
    main()
