"""Lowering of RNN, GRU and LSTM, unrolled over the static sequence.

Each step is a Gemm for its input projection X_t W^T + Wb, a Gemm H_{t-1} R^T + Rb (with the input
projection in its epilogue where the gates allow) and the gate maps. Projecting step by step keeps one
step's projection alive instead of the whole sequence's. Each step's H is written into its slice of Y, and Y_h (Y_c) is a view of the last step's H (C)
when there is one direction.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...graph.ir import Node
from ...graph.rules.recurrent import GATES, activations
from ...instr.ir import Epilogue, Gemm, Map, View, substitute
from ..context import Context, lowering

EXPRS = {"sigmoid": "(1.0f / (1.0f + expf(-{0})))", "tanh": "tanhf({0})", "relu": "fmaxf({0}, 0.0f)"}


def _act(name: str, inner: str) -> str:
    return substitute(EXPRS[name], {"0": f"({inner})"})


def _pick(view: View, i: int) -> View:
    """view[i]: the first dim dropped."""
    return replace(view, offset=view.offset + i * view.strides[0], shape=view.shape[1:], strides=view.strides[1:])


def _gates(view: View, first: int, count: int, hidden: int) -> View:
    """Gates first .. first + count - 1 of a [..., gates * hidden] view."""
    return view.slice(len(view.shape) - 1, first * hidden, count * hidden)


@dataclass(frozen=True)
class _Cell:
    """What every step of one direction reads."""
    ctx: Context
    node: Node
    hidden: int
    batch: int
    w_t: View            # [input, gates * hidden]
    wb: View | None      # [gates * hidden]
    r_t: View            # [hidden, gates * hidden]
    rb: View | None      # [gates * hidden]
    peephole: View | None  # [3 * hidden]: P_i, P_o, P_f
    acts: tuple[str, ...]

    def temp(self, gates: int, label: str) -> View:
        return self.ctx.temp((self.batch, gates * self.hidden), f"{self.node.name} {label}")

    def project(self, x: View) -> View:
        """X_t W^T + Wb for one step: [batch, gates * hidden]."""
        out = self.temp(self.w_t.shape[1] // self.hidden, "input projection")
        epi = Epilogue() if self.wb is None else Epilogue("({acc} + {0})", (self.wb.broadcast_to(out.shape),))
        self.ctx.emit(Gemm(out, x, self.w_t, epi, self.node.name))
        return out

    def recurrence(self, h: View, out: View, first: int, count: int, extra: View | None = None,
                   act: str | None = None) -> None:
        """out = act(h R^T + Rb + extra) over gates first .. first + count - 1: one Gemm."""
        bias = None if self.rb is None else _gates(self.rb, first, count, self.hidden)
        ins = [v for v in (extra, bias) if v is not None]
        terms = " + ".join(["{acc}"] + ["{%d}" % i for i in range(len(ins))])
        expr = _act(act, terms) if act else f"({terms})" if ins else terms  # bracketed: fusion substitutes it
        self.ctx.emit(Gemm(out, h, _gates(self.r_t, first, count, self.hidden),
                           Epilogue(expr, tuple(v.broadcast_to(out.shape) for v in ins)), self.node.name))


def _rnn_step(cell: _Cell, xw: View, h: View, out: View, c: View | None, c_out: View | None) -> None:
    cell.recurrence(h, out, 0, 1, xw, cell.acts[0])


def _gru_step(cell: _Cell, xw: View, h: View, out: View, c: View | None, c_out: View | None) -> None:
    f, g = cell.acts
    n = cell.temp(1, "candidate")
    if cell.node.attr("linear_before_reset", 0):  # n = g(x_n + r * (h R_n^T + Rb_n))
        rec = cell.temp(3, "recurrence")
        cell.recurrence(h, rec, 0, 3)
        parts = [_gates(v, k, 1, cell.hidden) for v, k in ((xw, 2), (xw, 1), (rec, 1), (rec, 2))]
        cell.ctx.emit(Map(n, tuple(parts), _act(g, "{0} + " + _act(f, "{1} + {2}") + " * {3}"), cell.node.name))
        z, z_expr = (_gates(xw, 0, 1, cell.hidden), _gates(rec, 0, 1, cell.hidden)), "{2} + {3}"
    else:  # n = g(x_n + (r * h) R_n^T + Rb_n)
        zr = cell.temp(2, "update and reset gates")
        cell.recurrence(h, zr, 0, 2, _gates(xw, 0, 2, cell.hidden))
        rh = cell.temp(1, "reset state")
        cell.ctx.emit(Map(rh, (_gates(zr, 1, 1, cell.hidden), h), _act(f, "{0}") + " * {1}", cell.node.name))
        cell.recurrence(rh, n, 2, 1, _gates(xw, 2, 1, cell.hidden), g)
        z, z_expr = (_gates(zr, 0, 1, cell.hidden),), "{2}"
    # h' = (1 - z) * n + z * h
    cell.ctx.emit(Map(out, (n, h) + z, "({0} + " + _act(f, z_expr) + " * ({1} - {0}))", cell.node.name))


def _lstm_step(cell: _Cell, xw: View, h: View, out: View, c: View, c_out: View) -> None:
    f, g, act_h = cell.acts
    pre = cell.temp(4, "gates")
    cell.recurrence(h, pre, 0, 4, xw)
    i, o, forget, candidate = (_gates(pre, k, 1, cell.hidden) for k in range(4))
    # c' = f(forget + P_f c) * c + f(i + P_i c) * g(candidate), then h' = f(o + P_o c') * h(c')
    c_ins, h_ins, peep_i, peep_f, peep_o = (i, forget, candidate, c), (o, c_out), "", "", ""
    if cell.peephole is not None:
        p_i, p_o, p_f = (_gates(cell.peephole, k, 1, cell.hidden).broadcast_to(c.shape) for k in range(3))
        c_ins, h_ins = c_ins + (p_i, p_f), h_ins + (p_o,)
        peep_i, peep_f, peep_o = " + {4} * {3}", " + {5} * {3}", " + {2} * {1}"
    c_expr = f"({_act(f, '{1}' + peep_f)} * {{3}} + {_act(f, '{0}' + peep_i)} * {_act(g, '{2}')})"
    cell.ctx.emit(Map(c_out, c_ins, c_expr, cell.node.name))
    cell.ctx.emit(Map(out, h_ins, f"({_act(f, '{0}' + peep_o)} * {_act(act_h, '{1}')})", cell.node.name))


STEPS = {"RNN": _rnn_step, "GRU": _gru_step, "LSTM": _lstm_step}


def _optional(ctx: Context, node: Node, i: int) -> View | None:
    return ctx.view(node.inputs[i]) if len(node.inputs) > i and node.inputs[i] else None


def _state(ctx: Context, node: Node, i: int, d: int, shape: tuple[int, int]) -> View:
    """Direction d's initial_h or initial_c, [batch, hidden]; zeros, made when the direction starts (so
    that they are not alive during the other direction), when omitted."""
    view = _optional(ctx, node, i)
    if view is None:
        view = ctx.temp(shape, f"{node.name} initial state")
        ctx.emit(Map(view, (), "0.0f", node.name))
        return view
    return _pick(view.permute((1, 0, 2)) if node.attr("layout", 0) else view, d)


def _final(ctx: Context, node: Node, i: int, views: list[View], used: set[str]) -> None:
    """Y_h or Y_c from each direction's last state: a view when there is one direction, else a copy."""
    name = node.outputs[i] if len(node.outputs) > i else ""
    if name not in used:
        return
    view = views[0].reshape(ctx.shape(name)) if len(views) == 1 else None
    if view is not None:
        ctx.bind(name, view)
        return
    out = ctx.new(name)
    out = out.permute((1, 0, 2)) if node.attr("layout", 0) else out
    for d, v in enumerate(views):
        ctx.emit(Map(_pick(out, d), (v,), "{0}", node.name))


@lowering("RNN", "GRU", "LSTM")
def _recurrent(ctx: Context, node: Node) -> None:
    layout = node.attr("layout", 0)
    x = ctx.view(node.inputs[0])
    x = x.permute((1, 0, 2)) if layout else x  # [seq, batch, input]
    r = ctx.view(node.inputs[2])
    hidden, (seq, batch) = r.shape[-1], x.shape[:2]
    gh = GATES[node.op] * hidden
    w_t = ctx.view(node.inputs[1]).permute((0, 2, 1))
    bias, peephole = _optional(ctx, node, 3), _optional(ctx, node, 7)
    used = set(ctx.graph.consumers()) | set(ctx.graph.outputs)
    y = ctx.new(node.outputs[0]) if node.outputs and node.outputs[0] in used else None
    y = y.permute((1, 2, 0, 3)) if y is not None and layout else y  # [seq, dirs, batch, hidden]
    last_h, last_c = [], []
    for d, acts in enumerate(activations(node)):
        cell = _Cell(ctx, node, hidden, batch, _pick(w_t, d), None if bias is None else _pick(bias, d).slice(0, 0, gh),
                     _pick(r.permute((0, 2, 1)), d), None if bias is None else _pick(bias, d).slice(0, gh, gh),
                     None if peephole is None else _pick(peephole, d), acts)
        reverse = d == 1 or node.attr("direction", "forward") == "reverse"
        h_d = _state(ctx, node, 5, d, (batch, hidden))
        c_d = _state(ctx, node, 6, d, (batch, hidden)) if node.op == "LSTM" else None
        # states not kept in Y take turns in the two halves of one buffer: each step reads one, writes the other
        hs = ctx.temp((2, batch, hidden), f"{node.name} states") if y is None else None
        cs = ctx.temp((2, batch, hidden), f"{node.name} cells") if c_d is not None else None
        for k, t in enumerate(reversed(range(seq)) if reverse else range(seq)):
            out = _pick(hs, k % 2) if y is None else _pick(_pick(y, t), d)
            c_out = None if c_d is None else _pick(cs, k % 2)
            STEPS[node.op](cell, cell.project(_pick(x, t)), h_d, out, c_d, c_out)
            h_d, c_d = out, c_out
        last_h.append(h_d)
        last_c.append(c_d)
    _final(ctx, node, 1, last_h, used)
    _final(ctx, node, 2, last_c, used)
