"""RNN, GRU and LSTM against onnxruntime (or the ONNX reference evaluator where onnxruntime lacks the
attribute: layout=1). Tolerance: relative 1e-5 (onnx_ops.TOL); the largest error seen is about 5e-7."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from cglow import CglowError

from tests.onnx_ops import TOL, check, ids, make_model, rand
from tests.util import assert_shapes_agree_with_onnx, cglow_run, random_feeds as feeds_for, rel_error

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
SEQ, BATCH, INPUT, HIDDEN = 4, 2, 3, 5


def recurrent_model(op: str, outputs=("y", "y_h", "y_c"), bias=True, initial=False, peephole=False,
                    runtime_weights=False, sequence_lens=None, opset=14, **attrs) -> onnx.ModelProto:
    """One recurrent node; outputs names Y, Y_h (and Y_c), "" for an omitted one."""
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    layout, gh = attrs.get("layout", 0), GATES[op] * HIDDEN
    state = (BATCH, dirs, HIDDEN) if layout else (dirs, BATCH, HIDDEN)
    specs = [("x", (BATCH, SEQ, INPUT) if layout else (SEQ, BATCH, INPUT)),
             ("w", rand(dirs, gh, INPUT, seed=2, scale=0.5)), ("r", rand(dirs, gh, HIDDEN, seed=3, scale=0.5)),
             ("b", rand(dirs, 2 * gh, seed=4) if bias else None), ("lens", sequence_lens),
             ("h0", state if initial else None)]
    if op == "LSTM":
        specs += [("c0", state if initial else None), ("p", rand(dirs, 3 * HIDDEN, seed=5) if peephole else None)]
    if runtime_weights:
        specs = [(n, s.shape if n in ("w", "r", "b") and s is not None else s) for n, s in specs]
    while specs[-1][1] is None:
        specs.pop()
    inputs = {n: s for n, s in specs if isinstance(s, tuple)}
    inits = {n: s for n, s in specs if isinstance(s, np.ndarray)}
    outputs = outputs[:2] if op != "LSTM" else outputs
    node = helper.make_node(op, [n if s is not None else "" for n, s in specs], list(outputs), hidden_size=HIDDEN,
                            **attrs)
    return make_model([node], inputs, [o for o in outputs if o], inits, opset)


CASES = [  # id, op, model options
    ("rnn", "RNN", {}),
    ("rnn-reverse", "RNN", dict(direction="reverse")),
    ("rnn-bidirectional-initial", "RNN", dict(direction="bidirectional", initial=True)),
    ("rnn-no-bias-Y-only", "RNN", dict(bias=False, outputs=("y", ""))),
    ("rnn-relu", "RNN", dict(activations=["Relu"])),
    ("rnn-bidirectional-mixed-activations", "RNN", dict(direction="bidirectional", activations=["Relu", "Sigmoid"])),
    ("gru", "GRU", {}),
    ("gru-linear-before-reset", "GRU", dict(linear_before_reset=1)),
    ("gru-reverse-initial", "GRU", dict(direction="reverse", initial=True)),
    ("gru-bidirectional", "GRU", dict(direction="bidirectional")),
    ("gru-bidirectional-lbr-Y_h-only", "GRU", dict(direction="bidirectional", linear_before_reset=1,
                                                   outputs=("", "y_h"))),
    ("gru-no-bias", "GRU", dict(bias=False)),
    ("gru-activations", "GRU", dict(activations=["Sigmoid", "Relu"])),
    ("lstm", "LSTM", {}),
    ("lstm-initial-peephole", "LSTM", dict(initial=True, peephole=True)),
    ("lstm-reverse", "LSTM", dict(direction="reverse", initial=True)),
    ("lstm-bidirectional-peephole", "LSTM", dict(direction="bidirectional", peephole=True, initial=True)),
    ("lstm-Y_c-only", "LSTM", dict(outputs=("", "", "y_c"))),
    ("lstm-Y_h-Y_c", "LSTM", dict(outputs=("", "y_h", "y_c"), direction="bidirectional")),
    ("lstm-no-bias", "LSTM", dict(bias=False)),
    ("lstm-runtime-weights", "LSTM", dict(runtime_weights=True, initial=True)),
    ("gru-runtime-weights", "GRU", dict(runtime_weights=True, linear_before_reset=1)),
    ("lstm-sequence-lens-full", "LSTM", dict(sequence_lens=np.full(BATCH, SEQ, np.int32))),
    ("lstm-activations", "LSTM", dict(activations=["Sigmoid", "Tanh", "Relu"])),
    ("lstm-opset11", "LSTM", dict(opset=11, initial=True)),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_recurrent(case):
    _, op, options = case
    check(recurrent_model(op, **options))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_batchwise_layout(op):
    """layout=1 ([batch, seq, ...]), which onnxruntime does not implement: against the ONNX reference."""
    model = recurrent_model(op, layout=1, initial=True, direction="bidirectional")
    assert_shapes_agree_with_onnx(model)
    feeds = feeds_for(model)
    want = ReferenceEvaluator(model).run(None, feeds)
    for got, ref in zip(cglow_run(model, feeds), want):
        assert rel_error(got, ref) <= TOL


def test_lstm_feeds_gemm():
    """Y_h of an LSTM read by a dense layer, as in a keyword-spotting model's head."""
    nodes = [helper.make_node("LSTM", ["x", "w", "r", "b"], ["", "h"], hidden_size=HIDDEN),
             helper.make_node("Squeeze", ["h", "axes"], ["s"]),
             helper.make_node("Gemm", ["s", "fc"], ["y"], transB=1)]
    inits = {"w": rand(1, 4 * HIDDEN, INPUT, seed=2, scale=0.5), "r": rand(1, 4 * HIDDEN, HIDDEN, seed=3, scale=0.5),
             "b": rand(1, 8 * HIDDEN, seed=4), "axes": np.array([0], np.int64), "fc": rand(3, HIDDEN, seed=5)}
    check(make_model(nodes, {"x": (SEQ, BATCH, INPUT)}, ["y"], inits))


REFUSED = [  # id, op, model options, message
    ("clip", "LSTM", dict(clip=3.0), "clip"),
    ("activation", "RNN", dict(activations=["LeakyRelu"]), "LeakyRelu|leakyrelu"),
    ("short-sequence", "GRU", dict(sequence_lens=np.array([SEQ, SEQ - 1], np.int32)), "sequence_lens"),
    ("input-forget", "LSTM", dict(input_forget=1), "input_forget"),
]


@pytest.mark.parametrize("case", REFUSED, ids=ids(REFUSED))
def test_recurrent_refused(case):
    _, op, options, message = case
    model = recurrent_model(op, **options)
    with pytest.raises(CglowError, match=message):
        cglow_run(model, feeds_for(model))
