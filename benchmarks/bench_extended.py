"""The continuation with its right-hand side in extended precision (``continue_flow(..., extended=True)``)
against float64: the bound it reaches late, and its cost.

Per Section 5 example file: the first-order continuation with the path bound from GD at 2e5 steps to 2e14
steps-equivalent (``EXTENSION_MAX``), once in float64 and once in extended precision (best of ``--repeat``
wall times each); per arithmetic the reported bound (``deviation_from_exact``) at 2e12 and 2e14, its tolerance
floor there, the right-hand side's evaluations and the ratio of the wall times.  A solve that stops early is
reported with where it stopped.

    .venv/bin/python benchmarks/bench_extended.py --markdown

About a minute on two cores.
"""
from __future__ import annotations

import argparse
import glob
import time

import numpy as np

from theory.core.problem import Problem
from theory.li2024 import local_convergence as lc
from theory.li2024.continuation import EXTENDED_EPS, continue_flow
from theory.li2024.provenance import deviation_from_exact

START, MARKS = 2 * 10**5, (2 * 10**12, 2 * 10**14)


def _at(run, step):
    hits = [c for c in run.checkpoints if c.step == step]
    return hits[0] if hits else None


def row(path: str, repeat: int) -> str:
    p = Problem.load(path)
    gd, _ = lc.train_section5(p, START)
    cells, seconds = [], {}
    for extended in (False, True):
        best, run = np.inf, None
        for _ in range(repeat):
            t = time.perf_counter()
            run = continue_flow(p, gd, MARKS[-1], checkpoints=list(MARKS), shadow=True, partial=True,
                                extended=extended)
            best = min(best, time.perf_counter() - t)
        seconds[extended] = best
        for m in MARKS:
            c = _at(run, m)
            cells.append("stopped" if c is None else f"{deviation_from_exact(c):.2e} ({c.rounding_floor:.1e})")
        cells.append(str(run.nfev))
    return (f"| {path.split('/')[-1]} | {p.loss} | {gd.eta:.3g} | " + " | ".join(cells)
            + f" | {seconds[False]:.2f} | {seconds[True]:.2f} | {seconds[True] / seconds[False]:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("files", nargs="*", default=sorted(glob.glob("examples/section5_*.json")))
    a = ap.parse_args()
    if EXTENDED_EPS is None:
        raise SystemExit("numpy's longdouble is float64 on this platform: no extended precision to measure")
    print(f"extended unit roundoff {EXTENDED_EPS:.3g} (float64: {np.finfo(float).eps:.3g})")
    print("| file | loss | η | float64 2e12: bound (floor) | 2e14 | evaluations | extended 2e12 | 2e14 | "
          "evaluations | float64 s | extended s | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for f in a.files:
        try:
            print(row(f, a.repeat), flush=True)
        except (FloatingPointError, ValueError) as exc:
            print(f"| {f.split('/')[-1]} | failed: {exc} |", flush=True)


if __name__ == "__main__":
    main()
