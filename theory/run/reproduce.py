"""Registry of the papers' experiments run by ``python -m theory reproduce NAME``.

Each entry maps a name to ``"module:function"``; the function takes the parsed ``argparse`` namespace
and returns a JSON-serialisable dict.  Imports are lazy so one experiment's dependencies never slow
another down.
"""
from __future__ import annotations

import importlib

EXPERIMENTS = {
    "li-cyclic": "theory.li2024.experiments:li_cyclic",
    "li-acyclic": "theory.li2024.experiments:li_acyclic",
    "li-local": "theory.li2024.experiments:li_local",
    "syn-small": "theory.tian2023.experiments:syn_small",
    "syn-medium": "theory.tian2023.experiments:syn_medium",
    "tian-fig3": "theory.tian2023.snap:tian_fig3",
    "tian-fig5": "theory.tian2023.adam:tian_fig5",
    "tian-fig8": "theory.tian2023.snap:tian_fig8",
    "tian-fig9": "theory.tian2023.snap:tian_fig9",
    "tian-fig11": "theory.tian2023.recall:tian_fig11",
    "tian-fig12": "theory.tian2023.recall:tian_fig12",
    "tian-fig7": "theory.tian2023.real_text:tian_fig7",
    "tian-fig10": "theory.tian2023.real_text:tian_fig10",
}


# Figure of an experiment's result, ``result -> PNG bytes``, for ``--figure FILE``.
FIGURES = {
    "li-local": "theory.li2024.experiments:li_local_figure",
    "tian-fig3": "theory.tian2023.snap:fig3_figure",
    "tian-fig5": "theory.tian2023.adam:fig5_figure",
    "tian-fig8": "theory.tian2023.snap:fig8_figure",
    "tian-fig9": "theory.tian2023.snap:fig9_figure",
    "tian-fig11": "theory.tian2023.recall:recall_figure",
    "tian-fig12": "theory.tian2023.recall:recall_figure",
    "tian-fig7": "theory.tian2023.real_text:fig7_figure",
    "tian-fig10": "theory.tian2023.real_text:fig10_figure",
}


def _load(ref: str):
    module, func = ref.split(":")
    return getattr(importlib.import_module(module), func)


def run(name: str, args) -> dict:
    """Run the experiment; with ``args.figure`` also write its figure (one place for every experiment)."""
    result = _load(EXPERIMENTS[name])(args)
    path = getattr(args, "figure", None)
    if path and name in FIGURES:
        with open(path, "wb") as fh:
            fh.write(_load(FIGURES[name])(result))
    return result
