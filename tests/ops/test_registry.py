"""The op specifications (OpSpec, declared in cglow/lower/ops/): what each one says holds together."""
from __future__ import annotations

import inspect

from cglow.graph.quant.fold import FORMS
from cglow.graph.registry import INT8_FORMS, OPS, onnx_ops


def test_every_op_lowers_or_folds():
    """An ONNX op has a shape rule and a lowering, or is always folded at import (Shape, Size...); an op that graph
    passes make (IntConv..., HybridGemm, ScaledGemm) has a lowering and no shape rule: it is never imported."""
    for op, spec in OPS.items():
        assert spec.shape is not None or spec.lower is not None, op
        assert spec.shape is not None or op.startswith(("Int", "Hybrid")) or op == "ScaledGemm", op
    assert len(onnx_ops()) > 100


def test_int8_forms_have_builders():
    assert set(FORMS) == set(INT8_FORMS) - {"float"}
    assert {spec.int8 for spec in OPS.values()} <= set(INT8_FORMS)
    assert all(OPS[op].int8 == "movement" for op in ("Reshape", "Transpose", "MaxPool", "Concat", "Gather"))


def test_shape_inputs_exist():
    """A shape input is an input the op's rule reads as a constant (Args.const), by its index."""
    for op, spec in OPS.items():
        if spec.shape_inputs:
            source = inspect.getsource(inspect.getmodule(spec.shape))
            assert "const(" in source, op
            assert all(0 <= i < 6 for i in spec.shape_inputs), op
