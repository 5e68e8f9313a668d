"""The path bound (``theory/li2024/shadowing.py``) against discrete GD through a change of selection, and its cost.

Part 1, per transit case: GD runs every step from ``START`` to ``TOP``; the first-order continuation starts from
GD's state at ``START`` with ``shadow=True``.  Per checkpoint: GD's distance to the continuation, Grönwall's bound
``D``, the path bound ``C`` and the reported one (their minimum), each with the integration error and the
tolerance floor added (``deviation_from_exact``); a distance above the reported bound is printed ``VIOLATED``.

Part 2, per Section 5 example file: the wall time of the continuation from GD at 2e4 steps to 2e12
steps-equivalent without and with the path bound (best of ``--repeat``), and both bounds at 2e12.

    .venv/bin/python benchmarks/bench_shadowing.py --markdown

About 100 s of GD for part 1 (``section5_ambiguous_after_late_transit.json`` to 2e8 steps).
"""
from __future__ import annotations

import argparse
import glob
import time

import numpy as np

from theory.core.problem import Problem
from theory.li2024 import local_convergence as lc
from theory.li2024.continuation import continue_flow
from theory.li2024.provenance import deviation_from_exact, engine_of
from theory.li2024.training import truncate

CASES = [("examples/section5_counterexample.json", 2 * 10**5, 10**7),
         ("examples/section5_ambiguous_after_late_transit.json", 2 * 10**4, 2 * 10**8)]


def against_gd(path: str, start: int, top: int) -> list[str]:
    p = Problem.load(path)
    gd, _ = lc.train_section5(p, top)
    begin = truncate(gd, start)
    steps = [c.step for c in gd.checkpoints if c.step > start]
    cont = continue_flow(p, begin, top, checkpoints=steps, estimate_error=True, shadow=True)
    at = {c.step: c.W for c in gd.checkpoints}
    rows = []
    for c in cont.checkpoints:
        if engine_of(c) == "gd":
            continue
        extra = deviation_from_exact(c) - c.gd_deviation_bound
        dist = float(np.linalg.norm(c.W - at[c.step]))
        D, C, used = c.gronwall_bound + extra, c.shadowing_bound + extra, deviation_from_exact(c)
        flag = " VIOLATED" if dist > used else ""
        rows.append(f"| {path.split('/')[-1]} | {c.step:.2e} | {dist:.2e} | {D:.2e} | {C:.2e} | {dist / used:.3f}{flag} |")
    return rows


def cost(path: str, repeat: int) -> str:
    p = Problem.load(path)
    gd, _ = lc.train_section5(p, 2 * 10**4)
    out = {}
    for shadow in (False, True):
        best = np.inf
        for _ in range(repeat):
            t = time.perf_counter()
            run = continue_flow(p, gd, 2 * 10**12, shadow=shadow, partial=True)
            best = min(best, time.perf_counter() - t)
        out[shadow] = (best, run.final)
    (t0, c0), (t1, c1) = out[False], out[True]
    reached = f"{c1.step:.0e}" + ("" if c1.step == 2 * 10**12 else " (stopped)")
    path_bound = f"{c1.shadowing_bound:.2e}" if c1.shadowing_bound is not None else "–"
    return (f"| {path.split('/')[-1]} | {reached} | {t0:.2f} | {t1:.2f} | {t1 / t0:.1f} | "
            f"{c1.gronwall_bound:.2e} | {path_bound} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print markdown tables (the default output too)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-gd", action="store_true", help="part 2 only")
    args = ap.parse_args()
    if not args.skip_gd:
        print("| case | step | GD's distance | D | path bound C | distance / min(D, C) |\n|---|---|---|---|---|---|")
        for case in CASES:
            print("\n".join(against_gd(*case)), flush=True)
        print()
    print("| file | reached | s without | s with | ratio | D at the end | C at the end |\n|---|---|---|---|---|---|---|")
    for path in sorted(glob.glob("examples/section5_*.json")):
        print(cost(path, args.repeat), flush=True)


if __name__ == "__main__":
    main()
