"""Lowering of Einsum: operands contracted pairwise from the left, each pair as one batched Gemm over
permuted views; letters that no later term needs are summed out first with a Reduce. A letter repeated within a
term reads the operand's diagonal: a view whose one dim steps by the sum of the repeated dims' strides."""
from __future__ import annotations

import numpy as np

from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import einsum as rules
from ...graph.rules.einsum import parse
from ...instr.expr import ACC, Input
from ...instr.ir import Epilogue, Gemm, Map, Reduce, View
from ..context import Context

Operand = tuple[View, str]  # a view and one letter per dim


def _sum_out(ctx: Context, x: Operand, keep: str, label: str, out: View | None = None) -> Operand:
    """x summed over its letters that `keep` lacks, the others in the order of `keep`, into `out` or a
    temporary; x itself when it has no such letter."""
    view, letters = x
    dropped = [c for c in letters if c not in keep]
    if not dropped:
        return x
    kept = [c for c in dict.fromkeys(keep) if c in letters]
    sizes = dict(zip(letters, view.shape))
    out = ctx.temp(tuple(sizes[c] for c in kept), label) if out is None else out
    ctx.emit(Reduce(out, (view.permute([letters.index(c) for c in kept + dropped]),), "sum", Input(0), ACC, label))
    return out, "".join(kept)


def _matrices(ctx: Context, x: Operand, batch: str, rows: str, cols: str, label: str) -> View:
    """x as [*batch, rows, cols] with the rows' and the columns' letters each merged into one dim."""
    view, letters = x
    sizes = dict(zip(letters, view.shape))
    view = view.permute([letters.index(c) for c in batch + rows + cols])
    shape = tuple(sizes[c] for c in batch) + (int(np.prod([sizes[c] for c in rows], dtype=np.int64)),
                                              int(np.prod([sizes[c] for c in cols], dtype=np.int64)))
    merged = view.reshape(shape)
    if merged is None:  # strides that do not merge: copy to row-major first
        copy = ctx.temp(view.shape, label)
        ctx.emit(Map(copy, (view,), Input(0), label))
        merged = copy.reshape(shape)
    return merged


def _product(ctx: Context, a: Operand, b: Operand, keep: str, label: str) -> Operand:
    """The product of two operands, summed over the letters they share that `keep` lacks."""
    a = _sum_out(ctx, a, keep + b[1], label)
    b = _sum_out(ctx, b, keep + a[1], label)
    (_, la), (_, lb) = a, b
    batch = "".join(c for c in la if c in lb and c in keep)
    contracted = "".join(c for c in la if c in lb and c not in keep)
    rows = "".join(c for c in la if c not in lb)
    cols = "".join(c for c in lb if c not in la)
    left = _matrices(ctx, a, batch, rows, contracted, label)
    right = _matrices(ctx, b, batch, contracted, cols, label)
    out = ctx.temp(left.shape[:-1] + right.shape[-1:], label)
    ctx.emit(Gemm(out, left, right, Epilogue(), label))
    sizes = dict(zip(la, a[0].shape)) | dict(zip(lb, b[0].shape))
    letters = batch + rows + cols
    return out.reshape(tuple(sizes[c] for c in letters)), letters


def _diagonal(view: View, term: str) -> Operand:
    """The operand with each repeated letter's dims as one, stepping along all of them at once."""
    letters = "".join(dict.fromkeys(term))
    return View(view.buf, view.offset, tuple(view.shape[term.index(c)] for c in letters),
                tuple(sum(s for t, s in zip(term, view.strides) if t == c) for c in letters)), letters


def _einsum(ctx: Context, node: Node) -> None:
    eq = parse(node, [ctx.shape(name) for name in node.inputs])
    operands = [_diagonal(ctx.view(name).broadcast_to(tuple(eq.sizes[c] for c in term)), term)
                for name, term in zip(node.inputs, eq.terms)]
    result = operands[0]
    for i in range(1, len(operands)):
        later = eq.out + "".join(eq.terms[i + 1:])
        result = _product(ctx, result, operands[i], later, node.name)
    view, letters = result
    if set(letters) == set(eq.out):
        ctx.bind(node.outputs[0], view.permute([letters.index(c) for c in eq.out]))
    else:
        _sum_out(ctx, result, eq.out, node.name, ctx.new(node.outputs[0]))


declare({
    "Einsum": OpSpec(rules.einsum, _einsum),
})
