"""Where the C helpers that generated files inline (runtime_c/, at the repository's root) are: inside the
installed package, where a wheel puts them (pyproject.toml maps them into cglow/runtime_c), or beside the
package in a source tree."""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).parent
RUNTIME_C = next((p for p in (PACKAGE / "runtime_c", PACKAGE.parent / "runtime_c") if p.is_dir()),
                 PACKAGE / "runtime_c")
