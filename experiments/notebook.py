"""What every notebook in ``notebooks/`` starts with: which size to run, where
the repository is, where its figure and numbers go.

``FEDFS_FULL=1`` (or ``FULL = True`` in the notebook's parameters cell) runs
the shipped full-size configs instead of the small CI versions;
``FEDFS_NOTEBOOK_OUT`` moves the output directory (default
``results/notebooks`` in the repository).
"""

from __future__ import annotations

import os
from pathlib import Path


def notebook_setup(full: bool) -> tuple[bool, Path, Path]:
    """(full size?, repository root, output directory, created)."""
    full = full or os.environ.get("FEDFS_FULL") == "1"
    root = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "configs" / "fedfs").is_dir())
    out = Path(os.environ.get("FEDFS_NOTEBOOK_OUT", root / "results" / "notebooks"))
    out.mkdir(parents=True, exist_ok=True)
    return full, root, out
