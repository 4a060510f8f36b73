"""`CONVOY_MUTANT=NAME python -m mutants.kubectl ...`: a broken `kubectl convoy` plugin."""

from __future__ import annotations

import os
import sys

from convoy.kubectl_plugin import main
from mutants import load
from mutants.__main__ import VARIABLE


def run() -> int:
    chosen = load().get(os.environ.get(VARIABLE, ""))
    if chosen is not None and chosen.kind == "plugin":
        chosen.apply()
    return main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(run())
