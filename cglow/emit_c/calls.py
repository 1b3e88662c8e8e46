"""The statements of net_run that call the kernels: one call per instruction, and a Repeat's loop in C around the
calls of its kernels (nested for a Repeat in its body); each kernel's function written once, for every call of the
same loops."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..instr.ir import Instr, Repeat, View
from ..kernels.kernel import comment
from ..kernels.render import render
from ..tiles import Tiles


class Calls:
    """Writes the calls, collecting the kernels' functions (`kernels`) and the buffers they are passed (`used`);
    `base` spells a view's pointer in C."""

    def __init__(self, dtypes: dict[int, np.dtype], base: Callable[[View], str], tiles: Tiles):
        self.dtypes, self.base, self.tiles = dtypes, base, tiles
        self.kernels: list[str] = []
        self.used: set[int] = set()
        self.first: dict[str, str] = {}  # a kernel's body and signature without its name -> its function

    def call(self, fn: str, instr: Instr, moving: View | None = None, shift: str = "") -> str:
        """The call of instr's kernel (written as `fn` unless an earlier one has its loops); the parameter in
        `moving`'s buffer at `shift` elements further."""
        kernel = render(fn, instr, self.dtypes, self.tiles)
        node, text = kernel.text.strip().split("\n", 1)  # the node's comment, then the function
        args = ", ".join(self.base(v) + (shift if moving is not None and v.buf == moving.buf else "")
                         for v in kernel.params)
        assert moving is None or sum(v.buf == moving.buf for v in kernel.params) == 1, instr
        self.used.update(v.buf for v in kernel.params)
        same = self.first.setdefault(text.replace(fn, "KERNEL"), fn)
        if same == fn:
            self.kernels.append(f"{node}\n{text}")
            return f"{fn}({args});"
        return f"{same}({args}); {node}"  # the same loops as an earlier kernel: called again, on its own buffers

    def loop(self, fn: str, r: Repeat, depth: int) -> str:
        """A Repeat as a for loop in C over its iterations' kernels, a loop nested in it indented further."""
        it, pad = f"it{depth}", "    " * (depth + 2)  # net_run's body starts 4 columns in
        lines = [f"for (int32_t {it} = 0; {it} < {r.trips}; ++{it}) {{ /* {comment(r.node)} */",
                 f"{self.base(r.out)}[0] = {it};"]
        for k, (instr, moving, step) in enumerate(r.copies()):
            shift = f" + {it} * {step}" if step >= 0 else f" - {it} * {-step}"
            lines.append(self.loop(f"{fn}_{k}", instr, depth + 1) if isinstance(instr, Repeat) else
                         self.call(f"{fn}_{k}_{instr.primitive}", instr, moving, shift))
        return f"\n{pad}".join(lines) + f"\n{pad[4:]}}}"
