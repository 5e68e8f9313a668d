"""The non-convex continuation's compiled right-hand side and Jacobian (:mod:`theory.li2024.curvature_kernel`)
against their numpy reference (``_Flow.rhs_numpy`` and ``_Flow.jac``'s numpy path), per call.

Per Section 5 example file: the flow from GD's state at 2e4 steps (``train_section5``), evaluated at its own
start; microseconds per call of each (best of ``--repeat`` timings of ``--calls`` calls, the call as the
integrator makes it: through ``_Flow``), and numpy's time over the compiled one's.  Every row also reports the two
arithmetics' largest difference relative to the largest entry, and stops at more than 1e-6: a benchmark of a
kernel that computes something else is no benchmark (the rounding tolerance itself is the property's,
``properties/li2024/test_curvature.py``; at a stationary start ``B``'s entries are rounding noise, 1.4e-8 of ``D``'s
on ``examples/section5_stationary_start.json``).

    .venv/bin/python benchmarks/bench_curvature_kernel.py --markdown

About a minute (the kernels compiled before).
"""
from __future__ import annotations

import argparse
import glob
import time

import numpy as np

from theory.core.problem import Problem
from theory.li2024 import local_convergence as lc
from theory.li2024.continuation import _Flow

START = 2 * 10**4


def _per_call(f, calls: int, repeat: int) -> float:
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(calls):
            f()
        best = min(best, (time.perf_counter() - t) / calls)
    return best * 1e6


def row(path: str, calls: int, repeat: int) -> str:
    p = Problem.load(path)
    gd, _ = lc.train_section5(p, START)
    flow = _Flow(p, gd.final.W, gd.eta)
    if flow.convex:
        return f"| {path.split('/')[-1]} | {p.loss} | convex: the flow kernel's, not this one's | | | | | | |"
    y = np.zeros(flow.n + 1)
    y[-1] = 1e-6
    s = float(np.log(gd.eta * START))

    def numpy_jac():
        flow.compiled = False
        try:
            return flow.jac(s, y)
        finally:
            flow.compiled = True

    worst = 0.0
    for got, ref, what in ((flow._float_rhs(s, y), flow.rhs_numpy(s, y), "right-hand side"),
                           (flow.jac(s, y), numpy_jac(), "Jacobian")):
        rel = float(np.max(np.abs(got - ref))) / max(float(np.max(np.abs(ref))), 1e-300)
        if not rel <= 1e-6:
            raise SystemExit(f"{path}: the compiled {what} differs from numpy's by {rel:.2e} relative")
        worst = max(worst, rel)
    rhs_c = _per_call(lambda: flow._float_rhs(s, y), calls, repeat)
    rhs_n = _per_call(lambda: flow.rhs_numpy(s, y), calls // 10 or 1, repeat)
    jac_c = _per_call(lambda: flow.jac(s, y), calls, repeat)
    jac_n = _per_call(numpy_jac, calls // 10 or 1, repeat)
    return (f"| {path.split('/')[-1]} | {p.loss} | {p.K} | {rhs_c:.1f} | {rhs_n:.1f} | {rhs_n / rhs_c:.1f} | "
            f"{jac_c:.1f} | {jac_n:.1f} | {jac_n / jac_c:.1f} | {worst:.1e} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("files", nargs="*", default=sorted(glob.glob("examples/section5_*.json")))
    a = ap.parse_args()
    if a.calls < 1 or a.repeat < 1:
        ap.error("--calls and --repeat are at least 1")
    print("| file | loss | K | rhs compiled µs | rhs numpy µs | ratio | Jacobian compiled µs | Jacobian numpy µs | ratio | difference |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in a.files:
        print(row(path, a.calls, a.repeat), flush=True)


if __name__ == "__main__":
    main()
