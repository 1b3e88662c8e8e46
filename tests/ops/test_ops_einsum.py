"""Einsum against onnxruntime (tolerance: onnx_ops.TOL, relative 1e-5)."""
from __future__ import annotations

import pytest
from onnx import helper

from cglow import CglowError

from tests.onnx_ops import check, ids, make_model, rand
from tests.util import cglow_run, random_feeds as feeds_for

CASES = [  # id, equation, operands (a tuple is a graph input of that shape, an ndarray a constant)
    ("matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
    ("matmul-weights", "ij,jk->ik", [(3, 4), rand(4, 5, seed=2)]),
    ("matmul-transposed-out", "ij,jk->ki", [(3, 4), (4, 5)]),
    ("matmul-transposed-in", "ji,jk->ik", [(4, 3), (4, 5)]),
    ("batch-matmul", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("attention-scores", "bhid,bhjd->bhij", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("attention-values", "bhij,bhjd->bihd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
    ("two-contracted", "bij,ijk->bk", [(2, 3, 4), rand(3, 4, 5, seed=2)]),
    ("outer", "i,j->ij", [(3,), (4,)]),
    ("inner-implicit", "i,i", [(5,), (5,)]),
    ("implicit-matmul", "ij,jk", [(3, 4), (4, 5)]),
    ("implicit-sorted", "ba,ac", [(3, 4), (4, 5)]),
    ("bilinear", "bn,anm,bm->ba", [(2, 3), rand(4, 3, 5, seed=2), (2, 5)]),
    ("summed-before", "ij,jk->i", [(3, 4), (4, 5)]),
    ("rows-not-mergeable", "acb,cd->abd", [(2, 3, 4), (3, 5)]),
    ("columns-not-mergeable", "ab,cbd->acd", [(2, 3), (4, 3, 5)]),
    ("elementwise", "ij,ij->ij", [(3, 4), (3, 4)]),
    ("ellipsis", "...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("ellipsis-broadcast", "...ij,...jk->...ik", [(2, 1, 3, 4), (1, 3, 4, 5)]),
    ("ellipsis-implicit", "...ij,...jk", [(2, 3, 4), (2, 4, 5)]),
    ("transpose", "ij->ji", [(3, 4)]),
    ("permute-3d", "abc->cab", [(2, 3, 4)]),
    ("sum-rows", "ij->i", [(3, 4)]),
    ("sum-first", "ij->j", [(3, 4)]),
    ("sum-all", "ij->", [(3, 4)]),
    ("sum-permute", "abc->ca", [(2, 3, 4)]),
    ("spaces", "b i j , b j k -> b i k", [(2, 3, 4), (2, 4, 5)]),
    ("uppercase", "Bij,Bjk->Bik", [(2, 3, 4), (2, 4, 5)]),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_einsum(case):
    _, equation, operands = case
    names = [f"x{i}" for i in range(len(operands))]
    inputs = {n: s for n, s in zip(names, operands) if isinstance(s, tuple)}
    inits = {n: s for n, s in zip(names, operands) if not isinstance(s, tuple)}
    check(make_model([helper.make_node("Einsum", names, ["y"], equation=equation)], inputs, ["y"], inits, 12))


def test_einsum_same_operand_twice():
    """x x^T, as a Gram matrix."""
    check(make_model([helper.make_node("Einsum", ["x", "x"], ["y"], equation="ij,kj->ik")], {"x": (3, 4)}, ["y"]))


DIAGONALS = [  # id, equation, operand shapes: a letter twice in a term reads a diagonal
    ("diagonal", "ii->i", [(3, 3)]),
    ("trace", "ii", [(4, 4)]),
    ("batch-diagonal", "bii->bi", [(2, 3, 3)]),
    ("diagonal-times", "iij,jk->ik", [(3, 3, 4), (4, 2)]),
    ("three-times", "iii->i", [(2, 2, 2)]),
]


@pytest.mark.parametrize("case", DIAGONALS, ids=ids(DIAGONALS))
def test_einsum_diagonal(case):
    _, equation, shapes = case
    names = [f"x{i}" for i in range(len(shapes))]
    check(make_model([helper.make_node("Einsum", names, ["y"], equation=equation)], dict(zip(names, shapes)),
                     [("y", None)], opset=12))


def test_einsum_letter_repeated_in_the_output_is_refused():
    model = make_model([helper.make_node("Einsum", ["x"], ["y"], equation="i->ii")], {"x": (3,)}, [("y", None)],
                       opset=12)
    with pytest.raises(CglowError, match="repeated in the output"):
        cglow_run(model, feeds_for(model))
