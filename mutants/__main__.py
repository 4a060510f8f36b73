"""`CONVOY_MUTANT=NAME python -m mutants [controller flags]`: a broken reference controller."""

from __future__ import annotations

import logging
import os
import sys

from convoy.__main__ import main
from mutants import load

VARIABLE = "CONVOY_MUTANT"


def run() -> int:
    name = os.environ.get(VARIABLE)
    mutants = load()
    if name not in mutants:
        print(f"{VARIABLE}={name!r}: not a mutant; known: {sorted(mutants)}", file=sys.stderr)
        return 2
    mutants[name].apply()
    logging.getLogger("convoy").warning("MUTANT %s: %s", name, mutants[name].description)
    return main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(run())
