"""The op registry: every lowered op has a shape rule, and the README lists exactly the supported ops."""
from __future__ import annotations

import re

from cglow.graph.registry import COMPILE_TIME, SHAPE_RULES
from cglow.graph import rules  # noqa: F401  (fills SHAPE_RULES)
from cglow.lower.context import LOWERINGS
from cglow.lower import ops  # noqa: F401  (fills LOWERINGS)
from cglow.lower.ops.quant import INTERNAL_OPS
from cglow.graph.quant.qoperator import QOPERATORS

from tests.util import ROOT


def test_every_shape_rule_has_a_lowering():
    """Ops folded at import whatever their inputs (Shape, Size...) need none; the integer ops that graph
    passes make (IntConv...) have a lowering and no shape rule."""
    assert set(SHAPE_RULES) | set(INTERNAL_OPS) == set(LOWERINGS) | COMPILE_TIME
    assert not set(INTERNAL_OPS) & set(SHAPE_RULES)
    assert not COMPILE_TIME & set(LOWERINGS)


def test_readme_lists_the_supported_ops():
    readme = (ROOT / "README.md").read_text()
    listed = re.search(r"<!-- ops:begin -->(.*?)<!-- ops:end -->", readme, re.S).group(1)
    assert sorted(op.strip() for op in listed.split(",")) == sorted(set(SHAPE_RULES) | set(QOPERATORS))
