"""Small U-Net segmenter: image [1,3,64,64] -> 2-class logits [1,2,64,64].

Three encoder levels (two 3x3 conv-BN-Relu, 2x2 MaxPool between), a bottleneck, three decoder levels
that upsample by 2 three different ways (ConvTranspose k2 s2; Resize nearest; Resize linear
half_pixel), concatenate the skip connection on channels and apply two 3x3 conv-BN-Relu; 1x1 conv."""

import numpy as np
import onnx

from ._helpers import Builder

WIDTHS = [16, 32, 64]  # encoder levels 1..3, at 64x64, 32x32, 16x16
BOTTLENECK = 128  # at 8x8


def _double_conv(b: Builder, x: str, name: str, cin: int, cout: int) -> str:
    x = b.conv_bn(x, f"{name}/conv1", cin, cout, 3)
    return b.conv_bn(x, f"{name}/conv2", cout, cout, 3)


def _conv_transpose(b: Builder, x: str, name: str, cin: int, cout: int) -> str:
    """2x upsampling ConvTranspose, kernel 2 stride 2 (W is [cin, cout, 2, 2])."""
    w = b.normal(f"{name}/W", (cin, cout, 2, 2), np.sqrt(2.0 / cin))
    bias = b.normal(f"{name}/B", (cout,), 0.1)
    return b.node("ConvTranspose", [x, w, bias], name, kernel_shape=[2, 2], strides=[2, 2])


def _resize(b: Builder, x: str, name: str, **attrs) -> str:
    """2x Resize (opset 13 form): roi omitted, scales an initializer, sizes absent."""
    return b.node("Resize", [x, "", "const/scales_2x"], name, **attrs)


def build(seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    b.const("const/scales_2x", [1.0, 1.0, 2.0, 2.0])
    skips, x, cin = [], "input", 3
    for level, width in enumerate(WIDTHS, start=1):
        x = _double_conv(b, x, f"enc{level}", cin, width)
        skips.append(x)
        x = b.node("MaxPool", [x], f"enc{level}/pool", kernel_shape=[2, 2], strides=[2, 2])
        cin = width
    x = _double_conv(b, x, "bottleneck", cin, BOTTLENECK)  # -> [1,128,8,8]
    cin = BOTTLENECK
    for level in (3, 2, 1):
        name = f"dec{level}"
        if level == 3:
            x = _conv_transpose(b, x, f"{name}/upsample", cin, WIDTHS[2])  # -> [1,64,16,16]
            cin = WIDTHS[2]
        elif level == 2:  # as PyTorch exports nn.Upsample(scale_factor=2, mode="nearest")
            x = _resize(b, x, f"{name}/upsample", mode="nearest", coordinate_transformation_mode="asymmetric",
                        nearest_mode="floor")  # -> [1,64,32,32]
        else:
            x = _resize(b, x, f"{name}/upsample", mode="linear",
                        coordinate_transformation_mode="half_pixel")  # -> [1,32,64,64]
        x = b.node("Concat", [x, skips[level - 1]], f"{name}/concat", axis=1)
        x = _double_conv(b, x, name, cin + WIDTHS[level - 1], WIDTHS[level - 1])
        cin = WIDTHS[level - 1]
    b.conv(x, "head", cin, 2, 1)
    return b.model("unet", [1, 3, 64, 64], [1, 2, 64, 64])
