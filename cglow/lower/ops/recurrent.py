"""Lowering of RNN, GRU and LSTM, unrolled over the static sequence.

Each step is a Gemm for its input projection X_t W^T + Wb, a Gemm H_{t-1} R^T + Rb (with the input
projection in its epilogue where the gates allow) and the gate maps. Projecting step by step keeps one
step's projection alive instead of the whole sequence's. Each step's H is written into its slice of Y, and Y_h (Y_c) is a view of the last step's H (C)
when there is one direction.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...graph.ir import Node
from ...graph.registry import OpSpec, declare
from ...graph.rules import recurrent as rules
from ...graph.rules.recurrent import GATES, activations
from ...instr.expr import ACC, F32, Expr, Input, call, inputs, lit, lt, select
from ...instr.ir import Epilogue, Gemm, Map, View
from ..context import Context

X, Y, Z = inputs(3)

# cglow_exp and cglow_tanh, not expf and tanhf: library calls that no gate loop vectorizes around
ACTIVATIONS = {"sigmoid": lambda x: 1.0 / (1.0 + call("cglow_exp", -x)), "tanh": lambda x: call("cglow_tanh", x),
               "relu": lambda x: select(lt(x, 0.0), 0.0, x)}


def _act(name: str, inner: Expr) -> Expr:
    return ACTIVATIONS[name](inner)


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

    def project(self, x: View, first: int = 0, count: int | None = None) -> View:
        """X_t W^T + Wb for one step over gates first .. first + count - 1 (all by default)."""
        count = self.w_t.shape[1] // self.hidden - first if count is None else count
        out = self.temp(count, "input projection")
        wb = None if self.wb is None else _gates(self.wb, first, count, self.hidden)
        epi = Epilogue() if wb is None else Epilogue(ACC + Input(0), (wb.broadcast_to(out.shape),))
        self.ctx.emit(Gemm(out, x, _gates(self.w_t, first, count, self.hidden), epi, self.node.name))
        return out

    def gate(self, x: View, h: View, k: int) -> View:
        """Gate k's pre-activation X_t W_k^T + Wb_k + H R_k^T + Rb_k: [batch, hidden]."""
        out = self.project(x, k, 1)
        self.recurrence(h, out, k, 1, out)
        return out

    def recurrence(self, h: View, out: View, first: int, count: int, extra: View | None = None,
                   act: str | None = None) -> None:
        """out = act(h R^T + Rb + extra) over gates first .. first + count - 1: one Gemm."""
        bias = None if self.rb is None else _gates(self.rb, first, count, self.hidden)
        ins = [v for v in (extra, bias) if v is not None]
        terms = sum(inputs(len(ins)), start=ACC)
        expr = _act(act, terms) if act else terms
        self.ctx.emit(Gemm(out, h, _gates(self.r_t, first, count, self.hidden),
                           Epilogue(expr, tuple(v.broadcast_to(out.shape) for v in ins)), self.node.name))


def _rnn_step(cell: _Cell, x: View, h: View, out: View, c: View | None, c_out: View | None) -> None:
    cell.recurrence(h, out, 0, 1, cell.project(x), cell.acts[0])


def _gru_step(cell: _Cell, x: View, h: View, out: View, c: View | None, c_out: View | None) -> None:
    """z and r accumulate onto their input projections, and the candidate n is written over x_n: a step
    needs its projection and one gate of scratch beyond the states."""
    f, g = cell.acts
    xw = cell.project(x)
    z_r = _gates(xw, 0, 2, cell.hidden)
    cell.recurrence(h, z_r, 0, 2, z_r)  # x_z + h R_z^T + Rb_z and the same for r, in place
    x_z, x_r, x_n = (_gates(xw, k, 1, cell.hidden) for k in range(3))
    if cell.node.attr("linear_before_reset", 0):  # n = g(x_n + r * (h R_n^T + Rb_n))
        rec = cell.temp(1, "recurrence")
        cell.recurrence(h, rec, 2, 1)
        cell.ctx.emit(Map(x_n, (x_n, x_r, rec), _act(g, X + _act(f, Y) * Z), cell.node.name))
    else:  # n = g(x_n + (r * h) R_n^T + Rb_n)
        rh = cell.temp(1, "reset state")
        cell.ctx.emit(Map(rh, (x_r, h), _act(f, X) * Y, cell.node.name))
        cell.recurrence(rh, x_n, 2, 1, x_n, g)
    # h' = (1 - z) * n + z * h
    cell.ctx.emit(Map(out, (x_n, h, x_z), X + _act(f, Z) * (Y - X), cell.node.name))


def _lstm_step(cell: _Cell, x: View, h: View, out: View, c: View, c_out: View) -> None:
    """The gates are made one at a time, in the order the cell update consumes them (i and g, then f,
    then o), so that at most two gates of scratch are alive; c_out may be c itself (updated in place).
    c' = f(forget + P_f c) * c + f(i + P_i c) * g(candidate), then h' = f(o + P_o c') * h(c')."""
    f, g, act_h = cell.acts
    p_i, p_o, p_f = (None,) * 3 if cell.peephole is None else \
        (_gates(cell.peephole, k, 1, cell.hidden).broadcast_to(c.shape) for k in range(3))
    i, candidate = cell.gate(x, h, 0), cell.gate(x, h, 3)
    w = Input(3)
    cell.ctx.emit(Map(i, (i, candidate) + ((c, p_i) if p_i is not None else ()),
                      _act(f, X + w * Z if p_i is not None else X) * _act(g, Y), cell.node.name))  # i * g, over i
    forget = cell.gate(x, h, 2)
    cell.ctx.emit(Map(c_out, (forget, c, i) + ((p_f,) if p_f is not None else ()),
                      _act(f, X + w * Y if p_f is not None else X) * Y + Z, cell.node.name))
    o = cell.gate(x, h, 1)
    cell.ctx.emit(Map(out, (o, c_out) + ((p_o,) if p_o is not None else ()),
                      _act(f, X + Z * Y if p_o is not None else X) * _act(act_h, Y), cell.node.name))


STEPS = {"RNN": _rnn_step, "GRU": _gru_step, "LSTM": _lstm_step}


def _optional(ctx: Context, node: Node, i: int) -> View | None:
    return ctx.view(node.inputs[i]) if len(node.inputs) > i and node.inputs[i] else None


def _initial(ctx: Context, node: Node, i: int, d: int) -> View | None:
    """Direction d's initial_h or initial_c, [batch, hidden], when the model gives it."""
    view = _optional(ctx, node, i)
    if view is None:
        return None
    return _pick(view.permute((1, 0, 2)) if node.attr("layout", 0) else view, d)


def _zeros(ctx: Context, node: Node, view: View) -> View:
    ctx.emit(Map(view, (), lit(0.0, F32), node.name))
    return view


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
        ctx.emit(Map(_pick(out, d), (v,), Input(0), node.name))


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
        # states not kept in Y take turns in two buffers (separate, so that the one not holding the final
        # state dies with the direction): step k reads one, writes the other; zero initial states are made
        # when the direction starts, in the buffer that step 0 reads
        hs = [ctx.temp((batch, hidden), f"{node.name} state") for _ in range(2)] if y is None else None
        h_d = _initial(ctx, node, 5, d)
        if h_d is None:
            h_d = _zeros(ctx, node, hs[1] if hs is not None else ctx.temp((batch, hidden), f"{node.name} h0"))
        c_d = c_out = None
        if node.op == "LSTM":  # the cell state is updated in place
            c_out = ctx.temp((batch, hidden), f"{node.name} cell")
            c_d = _initial(ctx, node, 6, d) or _zeros(ctx, node, c_out)
        for k, t in enumerate(reversed(range(seq)) if reverse else range(seq)):
            out = hs[k % 2] if y is None else _pick(_pick(y, t), d)
            STEPS[node.op](cell, _pick(x, t), h_d, out, c_d, c_out)
            h_d, c_d = out, c_out
        last_h.append(h_d)
        last_c.append(c_d)
    _final(ctx, node, 1, last_h, used)
    _final(ctx, node, 2, last_c, used)


declare({
    "GRU": OpSpec(rules.recurrent, _recurrent, shape_inputs=(4,)),
    "LSTM": OpSpec(rules.recurrent, _recurrent, shape_inputs=(4,)),
    "RNN": OpSpec(rules.recurrent, _recurrent, shape_inputs=(4,)),
})
