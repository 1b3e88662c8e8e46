"""Recurrent keyword spotter: MFCC frames [1,49,10] -> one bidirectional GRU layer (hidden 64 per direction)
-> final hidden states of both directions [1,128] -> 12-class softmax."""

import onnx

from . import gru_kws


def build(seed: int = 0) -> onnx.ModelProto:
    return gru_kws.build(seed, directions=2, name="bigru_kws")
