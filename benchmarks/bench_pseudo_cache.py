"""The pseudo-TPG's Graph-SVM solved once per distinct selection (``theory/li2024/pseudo.py``'s cache) against
solved at every call, on Section 5's verdicts.

Per shipped Section 5 example file (``examples/section5_*.json``; ``--skip`` leaves out slow ones): the wall time of
``local_convergence.verdict`` with the cache off and on, in one process, alternating, best of ``--repeat``; the
number of Graph-SVM solves each way; and whether both give the same verdict and reason (they must: the cache
returns the solution of the same embeddings, sequences and selection).

    .venv/bin/python benchmarks/bench_pseudo_cache.py --markdown

About 6 minutes on 2 cores with the defaults.
"""
from __future__ import annotations

import argparse
import glob
import time

from theory.core.problem import Problem
from theory.li2024 import local_convergence as lc
from theory.li2024 import pseudo

SLOW = ("section5_escape_past_gds_reach.json", "section5_converging_past_horizon.json",
        "section5_converging_past_the_extension.json", "section5_ambiguous_after_late_transit.json")


def _verdict(p: Problem, size: int):
    pseudo._SVM_CACHE.clear()
    pseudo._SVM_CACHE_SIZE = size
    solves = [0]
    solve = pseudo.graph_svm

    def counted(*a, **k):
        solves[0] += 1
        return solve(*a, **k)

    pseudo.graph_svm = counted
    try:
        t = time.perf_counter()
        outcome, why, _ = lc.verdict(p, p.replace(head=None, loss="log"), note=f"{p.loss} loss")
        return time.perf_counter() - t, solves[0], (outcome, why)
    finally:
        pseudo.graph_svm = solve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--skip", nargs="*", default=SLOW, help="example file names left out (default: the slow ones)")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    size = pseudo._SVM_CACHE_SIZE
    rows, total = [], [0.0, 0.0]
    for path in sorted(glob.glob("examples/section5_*.json")):
        if path.split("/")[-1] in a.skip:
            continue
        p = Problem.load(path)
        best = {0: (float("inf"), 0, None), size: (float("inf"), 0, None)}
        for _ in range(a.repeat):
            for s in (0, size):
                t, n, out = _verdict(p, s)
                best[s] = min(best[s], (t, n, out), key=lambda x: x[0])
        (t0, n0, v0), (t1, n1, v1) = best[0], best[size]
        total[0] += t0
        total[1] += t1
        same = "yes" if v0 == v1 else f"NO: {v0[0]} / {v1[0]}"
        rows.append(f"| {path.split('/')[-1]} | {v0[0]} | {n0} | {n1} | {t0:.2f} | {t1:.2f} | {t0 / t1:.2f} | {same} |")
    head = ["| file | verdict | solves, off | solves, on | s, off | s, on | ratio | same verdict |",
            "|---|---|---|---|---|---|---|---|"]
    out = head + rows + [f"| all | | | | {total[0]:.1f} | {total[1]:.1f} | {total[0] / total[1]:.2f} | |"]
    print("\n".join(out) if a.markdown else "\n".join(r.replace("|", " ") for r in out))


if __name__ == "__main__":
    main()
