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
    "tian-fig3": "theory.scansnap_snap:tian_fig3",
    "tian-fig5": "theory.scansnap_adam:tian_fig5",
    "tian-fig8": "theory.scansnap_snap:tian_fig8",
    "tian-fig9": "theory.scansnap_snap:tian_fig9",
    "tian-fig11": "theory.scansnap_recall:tian_fig11",
    "tian-fig12": "theory.scansnap_recall:tian_fig12",
}


def run(name: str, args) -> dict:
    module, func = EXPERIMENTS[name].split(":")
    return getattr(importlib.import_module(module), func)(args)
