"""Writes tests/data/tflite/*.tflite: small versions of the models users bring to a microcontroller, built with
Keras from seeded weights (nothing is downloaded) and converted by TensorFlow's own tf.lite.TFLiteConverter in the
variants users ship. tests/tflite/test_tflite_converted.py compiles each with cglow and compares it with LiteRT.

It needs TensorFlow (tested with tensorflow-cpu 2.21 and, for the LSTM, tf-keras 2.21: Keras 3 converts an LSTM
layer to a WHILE loop, Keras 2 to the fused UNIDIRECTIONAL_SEQUENCE_LSTM), which cglow and its tests do not: neither
the tests nor CI run this script; the files it writes are committed. Run it from the repository root under a
Python that has TensorFlow; the same TensorFlow writes the same bytes:

    python scripts/make_tflite_fixtures.py [--out tests/data/tflite]

Models (Keras 3 unless said; a free batch dimension, as Keras writes it, unless said):
  kws          MLPerf Tiny's DS-CNN keyword spotter, 49x10x1, 32 channels
  mobilenet    a MobileNetV1 (alpha 0.25) of four blocks at 48x48x3, Keras's ZeroPadding2D before each strided one
  resnet8      MLPerf Tiny's ResNet-8 at 32x32x3, widths 8-16-32
  autoencoder  MLPerf Tiny's dense autoencoder, 640 in, layers of 16 and 8
  lstm_kws     a streaming keyword spotter, batch 1: an LSTM of 32 cells (tf-keras, unroll=False) over 10 frames of
               40 features a run; LiteRT keeps its state from one run to the next, and so does cglow's C
  ops          the ops converters emit: LeakyReLU, ZeroPadding2D (PAD), x * relu6(x + 3) / 6, MaxPool, UpSampling2D,
               Concatenate, GlobalAveragePooling (MEAN), Dense on 4-D and 3-D inputs, Multiply, Add, Reshape,
               Flatten, tf.nn.softmax, and a second output
  ops_tfkeras  the same with tf-keras (UpSampling2D is a RESIZE_NEAREST_NEIGHBOR there)
Variants (file name suffixes):
  float        float32
  int8         full integer, int8 inputs and outputs (inference_input_type=tf.int8)
  int8_fio     full integer, float inputs and outputs (QUANTIZE and DEQUANTIZE at the ends)
  dynamic      dynamic range: int8 weights of the larger layers, float activations (hybrid operators)
  f16          float16 weights (DEQUANTIZE to float32 at load)"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402  (after the logging setting)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

VARIANTS = ("float", "int8", "int8_fio", "dynamic", "f16")
CALIBRATION_SAMPLES = 16


def seed_weights(model, seed: int) -> None:
    """Every weight drawn from one seeded generator, layer by layer: kernels normal with variance 2 / fan-in,
    biases, BatchNormalization offsets and means small, its scales and variances about 1."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        values = []
        for w, v in zip(layer.weights, layer.get_weights()):
            name = w.name.split("/")[-1].split(":")[0]
            if name in ("gamma", "moving_variance"):
                values.append(rng.uniform(0.5, 1.5, v.shape))
            elif name in ("beta", "bias", "moving_mean"):
                values.append(rng.normal(0, 0.1, v.shape))
            else:  # a kernel: depthwise ones (kh, kw, c, 1) sum kh * kw taps
                depthwise = type(layer).__name__ == "DepthwiseConv2D"
                fan_in = int(np.prod(v.shape[:2] if depthwise else v.shape[:-1]))
                values.append(rng.normal(0, np.sqrt(2 / fan_in), v.shape))
        layer.set_weights([v.astype(np.float32) for v in values])


def bn_relu(x, relu6: bool = False):
    x = keras.layers.BatchNormalization()(x)
    return keras.layers.ReLU(6.0 if relu6 else None)(x)


def kws():
    x = inp = keras.Input((49, 10, 1))
    x = bn_relu(keras.layers.Conv2D(32, (10, 4), strides=2, padding="same")(x))
    for _ in range(4):
        x = bn_relu(keras.layers.DepthwiseConv2D(3, padding="same")(x))
        x = bn_relu(keras.layers.Conv2D(32, 1)(x))
    x = keras.layers.AveragePooling2D((25, 5))(x)
    x = keras.layers.Flatten()(x)
    return keras.Model(inp, keras.layers.Dense(12, activation="softmax")(x))


def mobilenet():
    x = inp = keras.Input((48, 48, 3))
    x = bn_relu(keras.layers.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(x), True)
    for filters, stride in ((16, 1), (32, 2), (32, 1), (64, 2)):
        if stride == 2:
            x = keras.layers.ZeroPadding2D(((0, 1), (0, 1)))(x)
        pad = "same" if stride == 1 else "valid"
        x = bn_relu(keras.layers.DepthwiseConv2D(3, strides=stride, padding=pad, use_bias=False)(x), True)
        x = bn_relu(keras.layers.Conv2D(filters, 1, use_bias=False)(x), True)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, keras.layers.Dense(2, activation="softmax")(x))


def resnet8():
    x = inp = keras.Input((32, 32, 3))
    x = bn_relu(keras.layers.Conv2D(8, 3, padding="same")(x))
    for filters, stride in ((8, 1), (16, 2), (32, 2)):
        y = bn_relu(keras.layers.Conv2D(filters, 3, strides=stride, padding="same")(x))
        y = keras.layers.BatchNormalization()(keras.layers.Conv2D(filters, 3, padding="same")(y))
        if stride != 1:
            x = keras.layers.Conv2D(filters, 1, strides=stride)(x)
        x = keras.layers.ReLU()(keras.layers.Add()([x, y]))
    x = keras.layers.AveragePooling2D(8)(x)
    x = keras.layers.Flatten()(x)
    return keras.Model(inp, keras.layers.Dense(10, activation="softmax")(x))


def autoencoder():
    x = inp = keras.Input((640,))
    for units in (16, 16, 8, 16, 16):
        x = bn_relu(keras.layers.Dense(units)(x))
    return keras.Model(inp, keras.layers.Dense(640)(x))


def lstm_kws():
    x = inp = tf_keras.Input((10, 40), batch_size=1)
    x = tf_keras.layers.LSTM(32, unroll=False)(x)
    return tf_keras.Model(inp, tf_keras.layers.Dense(12, activation="softmax")(x))


def ops(k):
    """Built with `k`, Keras 3 or tf-keras: their converted files differ (Keras 3's UpSampling2D is a TILE, its
    Flatten and Dense on 3-D inputs compute their shapes with SHAPE, GATHER, REDUCE_PROD ...)."""
    x = inp = k.Input((16, 16, 3))
    a = k.layers.LeakyReLU(0.1)(k.layers.Conv2D(8, 3, padding="same")(x))
    a = k.layers.ZeroPadding2D(((1, 0), (0, 1)))(a)
    b = k.layers.Conv2D(8, 3, strides=2)(a)                              # 8x8
    b = k.layers.Multiply()([b, k.layers.ReLU(6.0)(b + 3.0)]) / 6.0      # hard-swish, spelled out
    u = k.layers.UpSampling2D(2)(k.layers.MaxPooling2D(2)(b))
    c = k.layers.Concatenate()([b, u])                                   # 8x8x16
    g = k.layers.GlobalAveragePooling2D(keepdims=True)(c)
    g = k.layers.Dense(16, activation="sigmoid")(g)                      # on 1x1x16
    s = k.layers.Add()([k.layers.Multiply()([c, g]), c])
    r = k.layers.Dense(8)(k.layers.Reshape((64, 16))(s))                 # Dense on a 3-D input
    head = k.layers.Activation(tf.nn.softmax)(k.layers.Dense(10)(k.layers.Flatten()(r)))
    side = k.layers.Dense(4)(k.layers.GlobalAveragePooling2D()(b))
    return k.Model(inp, [head, side])


MODELS = {"kws": kws, "mobilenet": mobilenet, "resnet8": resnet8, "autoencoder": autoencoder,
          "lstm_kws": lstm_kws, "ops": lambda: ops(keras), "ops_tfkeras": lambda: ops(tf_keras)}


def calibration(model, seed: int) -> list[np.ndarray]:
    """The representative dataset: standard normal inputs, the shape of the model's input with batch 1."""
    rng = np.random.default_rng(seed)
    shape = (1, *model.inputs[0].shape[1:])
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(CALIBRATION_SAMPLES)]


def convert(model, variant: str, samples: list[np.ndarray]) -> bytes:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if variant != "float":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant in ("int8", "int8_fio"):
        converter.representative_dataset = lambda: ([x] for x in samples)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if variant == "int8":
        converter.inference_input_type = converter.inference_output_type = tf.int8
    if variant == "f16":
        converter.target_spec.supported_types = [tf.float16]
    return converter.convert()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="tests/data/tflite", help="the folder to write (default: %(default)s)")
    parser.add_argument("models", nargs="*", metavar="MODEL", help=f"of {', '.join(MODELS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.models) - set(MODELS))
    if unknown:
        parser.error(f"no model {', '.join(unknown)}; the models are {', '.join(MODELS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for seed, name in enumerate(MODELS):
        if args.models and name not in args.models:
            continue
        keras.utils.set_random_seed(seed)
        model = MODELS[name]()
        seed_weights(model, seed)
        samples = calibration(model, seed)
        for variant in VARIANTS:
            path = out / f"{name}_{variant}.tflite"
            path.write_bytes(convert(model, variant, samples))
            print(f"{path}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
