"""Elementwise, comparison, logical and conversion ops: single-node (or tiny) models compiled by cglow and run
as C, compared with onnxruntime, in float32 and in the integer and bool types ONNX allows for each op.

Float outputs within TOL by tests/util.rel_error, integer and bool outputs exact. Where onnxruntime has no
kernel for a type (NOT_IMPLEMENTED), the ONNX reference evaluator is the reference.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from cglow import CglowError

from tests.onnx_ops import TOL, check, f32, node_model, pos
from tests.util import assert_shapes_agree_with_onnx, cglow_run, checked_model, ort_run, rel_error

SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
NUMERIC = ("float32",) + SIGNED + UNSIGNED
ALL = NUMERIC + ("bool",)


# --- typed models -----------------------------------------------------------------------------------

def typed_model(op: str, ins, opset: int = 18, outputs: int = 1, **attrs) -> onnx.ModelProto:
    """One node. ins: (name, spec) in input order; a (dtype, shape) spec is a graph input, an ndarray an
    initializer, None an omitted optional input. The output types come from ONNX shape inference."""
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(s[0])), list(s[1]))
              for n, s in ins if isinstance(s, tuple)]
    inits = [numpy_helper.from_array(s, n) for n, s in ins if isinstance(s, np.ndarray)]
    names = ["y"] + [f"y{i}" for i in range(1, outputs)]
    node = helper.make_node(op, [n if s is not None else "" for n, s in ins], names, **attrs)
    return graph_model([node], inputs, [helper.make_tensor_value_info(n, 0, None) for n in names], inits, opset)


def graph_model(nodes, inputs, outputs, inits, opset: int) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializer=inits)
    return checked_model(graph, opset)


def values(dtype: str, shape, seed: int = 0) -> np.ndarray:
    """Random values of a type: normal floats, small integers (negative ones when signed), 0/1 bools."""
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(-50 if dtype in SIGNED else 0, 51, shape).astype(dtype)


def typed_feeds(model: onnx.ModelProto, nonzero: bool = False) -> dict[str, np.ndarray]:
    feeds = {}
    for i, v in enumerate(model.graph.input):
        dtype = helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type).name
        x = values(dtype, [d.dim_value for d in v.type.tensor_type.shape.dim], seed=i)
        feeds[v.name] = np.where(x == 0, np.ones_like(x), x) if nonzero else x
    return feeds


def reference(model: onnx.ModelProto, feeds) -> list[np.ndarray]:
    try:
        return ort_run(model, feeds)
    except Exception as exc:  # onnxruntime lacks a kernel for some types
        if "NOT_IMPLEMENTED" not in str(exc):
            raise
        return [np.asarray(r) for r in ReferenceEvaluator(model).run(None, feeds)]


def check_typed(model: onnx.ModelProto, feeds=None, nonzero: bool = False, tol: float = TOL):
    feeds = typed_feeds(model, nonzero) if feeds is None else feeds
    assert_shapes_agree_with_onnx(model)
    want = reference(model, feeds)
    got = cglow_run(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if g.dtype == np.float32:
            assert np.array_equal(np.isnan(g), np.isnan(w))
            err = rel_error(np.nan_to_num(g), np.nan_to_num(w))
            assert err <= tol, f"relative error {err:.3g} > {tol}"
        else:
            np.testing.assert_array_equal(g, w)


def refused(model: onnx.ModelProto, match: str):
    with pytest.raises(CglowError, match=match):
        cglow_run(model, typed_feeds(model))


def limit(dtype: str, which: str) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.array(info.min if which == "min" else info.max, dtype)


# --- arithmetic ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_arithmetic(op, dtype):
    """Broadcasting; unsigned Sub wraps, narrow types wrap like onnxruntime's, Div truncates toward zero."""
    check_typed(typed_model(op, [("a", (dtype, (2, 3, 4))), ("b", (dtype, (3, 1)))]), nonzero=True)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64", "uint64"])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_arithmetic_constant(op, dtype):
    """A uniform constant is a literal, a non-uniform one a broadcast const buffer."""
    check_typed(typed_model(op, [("a", (dtype, (3, 4))), ("b", np.array(7, dtype))]))
    check_typed(typed_model(op, [("a", np.array([3, 9, 1, 5], dtype)), ("b", (dtype, (3, 4)))]), nonzero=True)


def test_integer_div_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 1, -1, 0, 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, 3, 4, -5], np.int32)
    check_typed(typed_model("Div", [("a", ("int32", (8,))), ("b", ("int32", (8,)))]), feeds={"a": a, "b": b})


def test_narrow_results_wrap_before_a_fused_consumer():
    """uint8 Sub wraps to 254 before the comparison that reads it fuses with it."""
    nodes = [helper.make_node("Sub", ["a", "b"], ["d"]), helper.make_node("Less", ["d", "c"], ["y"])]
    model = graph_model(nodes, [helper.make_tensor_value_info(n, TensorProto.UINT8, [3]) for n in "abc"],
                        [helper.make_tensor_value_info("y", TensorProto.BOOL, [3])], [], 18)
    feeds = {"a": np.array([3, 9, 0], np.uint8), "b": np.array([5, 1, 1], np.uint8), "c": np.array([200] * 3, np.uint8)}
    check_typed(model, feeds=feeds)


# --- numeric unaries and Clip -------------------------------------------------------------------------

NUMERIC_UNARY = [("Relu", ("float32",) + SIGNED), ("Neg", ("float32",) + SIGNED), ("Abs", NUMERIC), ("Sign", NUMERIC)]


@pytest.mark.parametrize("op,dtype", [(op, t) for op, types in NUMERIC_UNARY for t in types])
def test_numeric_unary(op, dtype):
    check_typed(typed_model(op, [("x", (dtype, (2, 3, 4)))]))


def test_sign_of_zero():
    x = np.array([0.0, -0.0, 2.5, -1e-30, 1e-30], np.float32)
    check_typed(typed_model("Sign", [("x", ("float32", (5,)))]), feeds={"x": x})


CLIP_BOUNDS = [  # id, bounds for a dtype: (lo, hi), each an array, "input" (a graph input), or None
    ("both", lambda t: (np.array(-5 if t in SIGNED + ("float32",) else 5, t), np.array(20, t))),
    ("min-only", lambda t: (np.array(10, t), None)),
    ("max-only", lambda t: (None, np.array(10, t))),
    ("runtime", lambda t: ("input", "input")),
    ("type-limits", lambda t: (limit(t, "min"), limit(t, "max"))),
]


@pytest.mark.parametrize("case, dtype", [pytest.param(c, t, id=f"{c[0]}-{t}") for c in CLIP_BOUNDS for t in NUMERIC
                                         if not (c[0] == "type-limits" and t == "float32")])  # integer limits only
def test_clip(case, dtype):
    ins = [("x", (dtype, (2, 3, 4)))]
    for name, bound in zip(("lo", "hi"), case[1](dtype)):
        ins.append((name, (dtype, ()) if isinstance(bound, str) else bound))
    while ins[-1][1] is None:
        ins.pop()
    check_typed(typed_model("Clip", ins, opset=13))


# --- float activations ----------------------------------------------------------------------------------

FLOAT_UNARY = [  # id, op, attrs, input scale, opset
    ("Elu", "Elu", {}, 2.0, 13),
    ("Elu-alpha", "Elu", dict(alpha=0.5), 2.0, 13),
    ("Selu", "Selu", {}, 2.0, 13),
    ("Selu-attrs", "Selu", dict(alpha=2.0, gamma=3.0), 2.0, 13),
    ("HardSigmoid", "HardSigmoid", {}, 4.0, 13),
    ("HardSigmoid-attrs", "HardSigmoid", dict(alpha=0.5, beta=0.6), 4.0, 13),
    ("HardSwish", "HardSwish", {}, 4.0, 14),
    ("Softplus", "Softplus", {}, 20.0, 13),
    ("Softsign", "Softsign", {}, 3.0, 13),
    ("Mish", "Mish", {}, 20.0, 18),
    ("Gelu", "Gelu", {}, 3.0, 20),
    ("Gelu-tanh", "Gelu", dict(approximate="tanh"), 3.0, 20),
    ("Reciprocal", "Reciprocal", {}, 1.0, 13),
    ("Floor", "Floor", {}, 3.0, 13),
    ("Ceil", "Ceil", {}, 3.0, 13),
    ("Sin", "Sin", {}, 4.0, 13),
    ("Cos", "Cos", {}, 4.0, 13),
    ("ThresholdedRelu", "ThresholdedRelu", dict(alpha=0.5), 2.0, 13),
    ("Celu", "Celu", dict(alpha=0.7), 2.0, 13),
    ("Shrink", "Shrink", dict(bias=0.25, lambd=0.75), 2.0, 13),
]


@pytest.mark.parametrize("case", FLOAT_UNARY, ids=[c[0] for c in FLOAT_UNARY])
def test_float_unary(case):
    _, op, attrs, scale, opset = case
    check(node_model(op, [("x", (2, 3, 4, 5))], opset=opset, **attrs), scale=scale)


def test_log():
    check(node_model("Log", [("x", (2, 3, 4))]), positive=True)


def test_round_halves_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.4999, 2.6, -2.6, 7.0], np.float32)
    check(node_model("Round", [("x", (10,))]), feeds={"x": x})


@pytest.mark.parametrize("op", ["Sqrt", "Exp", "Softplus", "Round"])
def test_float_only_ops_refuse_integers(op):
    refused(typed_model(op, [("x", ("int32", (3,)))], opset=13), "supported for float32 only")


def test_relu_refuses_unsigned():
    refused(typed_model("Relu", [("x", ("uint8", (3,)))]), "uint8; this op supports float32, int8")


# --- PRelu and Pow --------------------------------------------------------------------------------------

@pytest.mark.parametrize("slope", [f32(0.25), pos(4, seed=3), pos(3, 1, seed=3), "input"],
                         ids=["scalar", "last-axis", "middle-axis", "runtime"])
def test_prelu(slope):
    slope = ("float32", (4,)) if isinstance(slope, str) else slope
    check_typed(typed_model("PRelu", [("x", ("float32", (2, 3, 4))), ("slope", slope)], opset=16))


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint32", "uint64"])
def test_prelu_integer(dtype):
    check_typed(typed_model("PRelu", [("x", (dtype, (2, 3, 4))), ("slope", (dtype, (4,)))], opset=16))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("exponent", [np.array(1, np.int64), np.array(2, np.int32), np.array([3], np.int64),
                                      f32(2.0)], ids=["1", "2", "3", "2.0f"])
def test_pow_integer_base(dtype, exponent):
    check_typed(typed_model("Pow", [("x", (dtype, (2, 3))), ("e", exponent)], opset=15))


@pytest.mark.parametrize("base, exponent", [("int32", "int32"), ("int64", "int64"), ("int64", "int32"),
                                            ("int32", "float32")])
def test_pow_integer_base_runtime_exponent(base, exponent):
    """Exact integer powers (runtime_c/ipow.c), negative exponents truncating like onnxruntime."""
    model = typed_model("Pow", [("x", (base, (8,))), ("e", (exponent, (8,)))], opset=15)
    x = np.array([2, -3, 5, 1, -1, 0, 7, -2], base)
    e = np.array([10, 3, 0, -4, -3, 5, 2, -1], exponent) if exponent != "float32" else \
        np.array([10, 3, 0, 2, 1, 5, 2, 1], exponent)
    check_typed(model, feeds={"x": x, "e": e})


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64"])
def test_pow_float_base_integer_exponent(dtype):
    model = typed_model("Pow", [("x", ("float32", (2, 3))), ("e", (dtype, (3,)))], opset=15)
    check_typed(model, feeds={"x": pos(2, 3), "e": np.array([0, 3, 2], dtype)})


# --- variadic ops --------------------------------------------------------------------------------------

VARIADIC_SHAPES = [  # id, input shapes
    ("one", [(2, 3)]),
    ("two", [(2, 3), (2, 3)]),
    ("three-broadcast", [(2, 1, 4), (3, 1), (4,)]),
    ("four", [(3,), (2, 3), (1, 3), ()]),
]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("op", ["Min", "Max"])
@pytest.mark.parametrize("case", VARIADIC_SHAPES, ids=[c[0] for c in VARIADIC_SHAPES])
def test_min_max(case, op, dtype):
    check_typed(typed_model(op, [(f"x{i}", (dtype, s)) for i, s in enumerate(case[1])], opset=13))


@pytest.mark.parametrize("op", ["Min", "Max"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint64", "int64"])
def test_min_max_with_type_limits(op, dtype):
    """Constants at the limits of the type (Max(x, 0) of an unsigned x) must not make comparisons constant."""
    for which in ("min", "max"):
        check_typed(typed_model(op, [("x", (dtype, (2, 3))), ("c", limit(dtype, which))], opset=13))


@pytest.mark.parametrize("op", ["Sum", "Mean"])
@pytest.mark.parametrize("case", VARIADIC_SHAPES, ids=[c[0] for c in VARIADIC_SHAPES])
def test_sum_mean(case, op):
    check_typed(typed_model(op, [(f"x{i}", ("float32", s)) for i, s in enumerate(case[1])], opset=13))


# --- comparisons, logic, Where ------------------------------------------------------------------------

COMPARISONS = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison(op, dtype):
    model = typed_model(op, [("a", (dtype, (2, 3, 4))), ("b", (dtype, (3, 1)))], opset=16)
    feeds = typed_feeds(model)
    feeds["b"] = feeds["a"][0, :, :1].copy()  # some equal pairs
    check_typed(model, feeds=feeds)


@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint64"])
def test_comparison_with_type_limits(op, dtype):
    for which in ("min", "max"):
        check_typed(typed_model(op, [("x", (dtype, (2, 3))), ("c", limit(dtype, which))], opset=16))


def test_equal_bool():
    check_typed(typed_model("Equal", [("a", ("bool", (2, 3))), ("b", ("bool", (3,)))], opset=13))


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op):
    check_typed(typed_model(op, [("a", ("bool", (2, 3, 4))), ("b", ("bool", (4,)))]))
    check_typed(typed_model(op, [("a", ("bool", (2, 3))), ("b", np.array(True))]))


def test_not():
    check_typed(typed_model("Not", [("x", ("bool", (2, 3, 4)))]))


@pytest.mark.parametrize("dtype", ALL)
def test_where(dtype):
    check_typed(typed_model("Where", [("c", ("bool", (3, 1))), ("a", (dtype, (2, 3, 4))), ("b", (dtype, (4,)))]))


def test_where_constant_branches():
    check_typed(typed_model("Where", [("c", ("bool", (2, 3))), ("a", f32(-1.0)), ("b", pos(3, seed=4))]))


# --- NaN and infinity tests -----------------------------------------------------------------------------

SPECIAL = np.array([1.0, np.nan, np.inf, -np.inf, 0.0, -2.5, np.float32(3e38), -np.nan], np.float32)


def test_isnan():
    check_typed(typed_model("IsNaN", [("x", ("float32", (8,)))], opset=20), feeds={"x": SPECIAL})


@pytest.mark.parametrize("positive,negative", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_isinf(positive, negative):
    model = typed_model("IsInf", [("x", ("float32", (8,)))], opset=20, detect_positive=positive,
                        detect_negative=negative)
    check_typed(model, feeds={"x": SPECIAL})


@pytest.mark.parametrize("op", ["Relu", "Sign", "HardSigmoid", "HardSwish", "Clip", "Max", "Min", "Softplus", "Elu"])
def test_nan_and_infinity(op):
    """NaN goes through as in onnxruntime (fmaxf and fminf would drop it); infinities saturate."""
    more = {"Clip": [("lo", f32(-1.0)), ("hi", f32(1.0))], "Max": [("z", ("float32", (8,)))],
            "Min": [("z", ("float32", (8,)))]}
    ins = [("x", ("float32", (8,)))] + more.get(op, [])
    feeds = {"x": SPECIAL, "z": SPECIAL[::-1].copy()}
    check_typed(typed_model(op, ins, opset=14), feeds={n: feeds[n] for n, s in ins if isinstance(s, tuple)})


# --- Cast ----------------------------------------------------------------------------------------------

def cast_source(source: str, target: str) -> np.ndarray:
    """Values to cast: fractions, zeros and values beyond a narrower target's range (which wrap)."""
    if source == "bool":
        return np.array([True, False, True, True, False, False], bool)
    if source == "float32":
        x = [0.0, -0.0, 1.5, 2.99, 127.6, 300.25, 70000.5, 1e9]
        return np.array(x + [-1.5, -3.7, -200.2, -70000.5] if target != "uint64" else x + [0.3, 9e18], np.float32)
    info = np.iinfo(source)
    x = [0, 1, 7, 127, 128, 255, 256, 65535, 65536, 2 ** 31, 2 ** 32 + 3, 2 ** 53 + 1, info.max]
    if source in SIGNED:
        x += [-1, -7, -128, -129, -32769, -2 ** 31, info.min]
    return np.array([v for v in x if info.min <= v <= info.max], source)


@pytest.mark.parametrize("target", ALL)
@pytest.mark.parametrize("source", ALL)
def test_cast(source, target):
    x = cast_source(source, target)
    model = typed_model("Cast", [("x", (source, x.shape))], opset=13,
                        to=helper.np_dtype_to_tensor_dtype(np.dtype(target)))
    check_typed(model, feeds={"x": x})


@pytest.mark.parametrize("source,target", [("float32", "int8"), ("int64", "float32"), ("bool", "uint16"),
                                           ("int32", "int32")])
def test_cast_like(source, target):
    x = cast_source(source, target)
    check_typed(typed_model("CastLike", [("x", (source, x.shape)), ("like", np.zeros(2, target))], opset=15),
                feeds={"x": x})


@pytest.mark.parametrize("target", [TensorProto.COMPLEX64, TensorProto.FLOAT6E2M3, TensorProto.STRING])
def test_cast_to_other_types_is_refused(target):
    refused(typed_model("Cast", [("x", ("float32", (3,)))], opset=13, to=target), "a cast to .* is not supported")


def test_conversions_chain():
    """float -> uint8 (truncation), uint8 Sub (wrap), compare, Where, back to float: one fused map."""
    nodes = [helper.make_node("Cast", ["x"], ["u"], to=TensorProto.UINT8),
             helper.make_node("Sub", ["u", "k"], ["d"]),
             helper.make_node("GreaterOrEqual", ["d", "k"], ["g"]),
             helper.make_node("Where", ["g", "u", "d"], ["w"]),
             helper.make_node("Cast", ["w"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["f"], ["i"], to=TensorProto.INT32),
             helper.make_node("Div", ["i", "two"], ["y"])]
    inits = [numpy_helper.from_array(np.array(4, np.uint8), "k"), numpy_helper.from_array(np.array(2, np.int32), "two")]
    model = graph_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                        [helper.make_tensor_value_info("y", TensorProto.INT32, [8])], inits, 16)
    check_typed(model, feeds={"x": np.array([0.5, 3.9, 4.0, 9.7, 200.1, 255.0, 1.0, 7.5], np.float32)})


FUSED_CONSUMERS = [  # id, op, constant operand (int32) or None
    ("Sign", "Sign", None), ("Abs", "Abs", None), ("Relu", "Relu", None),
    ("Less-0", "Less", 0), ("GreaterOrEqual-0", "GreaterOrEqual", 0), ("Equal-300", "Equal", 300),
    ("Max-0", "Max", 0), ("Min-0", "Min", 0), ("Clip-0", "Clip", 0), ("Max-300", "Max", 300),
]


@pytest.mark.parametrize("case", FUSED_CONSUMERS, ids=[c[0] for c in FUSED_CONSUMERS])
def test_widening_cast_fused_into_a_comparison(case):
    """uint8 cast to int32, then compared with a constant that no uint8 reaches: the fused map must not
    compare a literal with what gcc sees as a uint8 (-Wtype-limits)."""
    _, op, constant = case
    inits = [] if constant is None else [numpy_helper.from_array(np.array(constant, np.int32), "k")]
    nodes = [helper.make_node("Cast", ["x"], ["c"], to=TensorProto.INT32),
             helper.make_node(op, ["c"] + (["k"] if inits else []), ["y"])]
    model = graph_model(nodes, [helper.make_tensor_value_info("x", TensorProto.UINT8, [6])],
                        [helper.make_tensor_value_info("y", 0, None)], inits, 16)
    check_typed(model, feeds={"x": np.array([0, 1, 7, 128, 255, 3], np.uint8)})


# --- Dropout ---------------------------------------------------------------------------------------------

def test_dropout_mask_keeps_everything():
    check_typed(typed_model("Dropout", [("x", ("float32", (2, 3))), ("ratio", f32(0.5))], opset=13, outputs=2))


def test_dropout_training_with_ratio_zero():
    ins = [("x", ("float32", (2, 3))), ("ratio", f32(0.0)), ("training", np.array(True))]
    check_typed(typed_model("Dropout", ins, opset=13, outputs=2))


def test_dropout_training_is_refused():
    ins = [("x", ("float32", (2, 3))), ("ratio", f32(0.5)), ("training", np.array(True))]
    refused(typed_model("Dropout", ins, opset=13), "training_mode=1 with a non-zero ratio")
