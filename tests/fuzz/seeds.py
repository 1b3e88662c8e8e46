"""The fuzz tests' seeds: a fixed one, the same every run, and a rotating one, the day's number, that
CGLOW_FUZZ_SEED overrides to replay a run (the tests print both)."""
from __future__ import annotations

import datetime
import os

FIXED_SEED = 2026


def seed(kind: str) -> int:
    if kind == "fixed":
        return FIXED_SEED
    return int(os.environ.get("CGLOW_FUZZ_SEED") or datetime.date.today().toordinal())
