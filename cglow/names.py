"""Fresh value names for the passes that add tensors to a model."""
from __future__ import annotations

from collections.abc import Container


def fresh_name(base: str, taken: set[str], also: Container[str] = ()) -> str:
    """`base`, else the first of base_1, base_2... that neither `taken` nor `also` holds; `taken` receives it."""
    name, i = base, 1
    while name in taken or name in also:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name
