"""Registry of the papers' experiments run by ``python -m theory reproduce NAME``.

Each entry maps a name to ``"module:function"``; the function takes the parsed ``argparse`` namespace
and returns a JSON-serialisable dict.  Imports are lazy so one experiment's dependencies never slow
another down.
"""
from __future__ import annotations

import importlib

EXPERIMENTS = {
    "li-cyclic": "theory.experiments:li_cyclic",
    "li-acyclic": "theory.experiments:li_acyclic",
    "li-local": "theory.experiments:li_local",
    "syn-small": "theory.scansnap_experiments:syn_small",
    "syn-medium": "theory.scansnap_experiments:syn_medium",
}


def run(name: str, args) -> dict:
    module, func = EXPERIMENTS[name].split(":")
    return getattr(importlib.import_module(module), func)(args)
