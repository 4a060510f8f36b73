"""What every benchmark does with its figures: print them, and keep them as JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

#: xdist workers of a development run of the whole suite (the Makefile's SUITE_WORKERS).
DEV_WORKERS = 12


def percentile(values: list[float], rank: float) -> float:
    """The nearest-rank percentile (p99 of 100 values is the 99th smallest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(rank / 100 * len(ordered)) - 1)]


def write_figures(path: Path, figures: dict) -> None:
    rounded = {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}
    for key, value in rounded.items():
        print(f"{key:>24}: {value}")
    path.write_text(json.dumps(rounded, indent=2) + "\n")
    print(f"figures written to {path}")
