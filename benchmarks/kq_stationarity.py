"""The GD claim's stationarity test (``li2024.kq_gd``, :func:`theory.li2024.factorized_claims.gd_decide`)
measured both ways: how the KKT residual of the decade increment moves over the last two decades, on runs that
are valid (GD on ``(W_K, W_Q)`` judged against ``W^nuc``) and planted (plain-W GD, heading to ``W^svm``,
judged against ``W^nuc``), at every budget where the rule's "settled" test passes with the error above
``CLOSE`` (where a residual above ``KKT_REJECT`` rejects).  Measurements, not assertions.

    .venv/bin/python benchmarks/kq_stationarity.py [--draws 12] [--steps 10000000] [--json OUT]

Problems: the kq-phase sweep's nine (shapes 4x4, 4x6, 6x6, seeds 0-2; :func:`theory.run.sweep.kq_phase_run`'s
draw) and the first ``--draws`` distinct draws of :func:`strategies.kq.disagreeing_problems` under a fixed
Hypothesis seed.  Valid runs: the factors at every kq-phase width (the sweep's problems) or at ``m = d``
(the claim's width; the drawn ones), factor seed 0.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hseed

from strategies.kq import disagreeing_problems
from theory.li2024 import factorized_claims as fc
from theory.li2024.analysis import analyze
from theory.li2024.factorized import train_factorized
from theory.li2024.losses import safe_step
from theory.li2024.nuclear import nuclear_svm
from theory.li2024.training import train
from theory.run.sweep import KQ_WIDTHS, kq_phase_problem


def sweep_problems():
    for seed in range(3):
        for K, d in ((4, 4), (4, 6), (6, 6)):
            drawn = kq_phase_problem(seed, K, d)
            if drawn is not None:
                yield f"sweep {K}x{d} s{seed}", drawn[0], [KQ_WIDTHS[w](d) for w in KQ_WIDTHS]


def drawn_problems(n: int, seed: int = 37):
    out, seen = [], set()

    @hseed(seed)
    @settings(max_examples=40 * n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(p=disagreeing_problems())
    def collect(p):
        key = p.E.tobytes()
        if len(out) < n and key not in seen:
            seen.add(key)
            out.append(p)

    collect()
    return [(f"drawn {i} K={p.K} d={p.d}", p, [p.d]) for i, p in enumerate(out)]


def rows(name, kind, checkpoints, p, an, target):
    """One row per budget 10^5, 10^6, ... where the rule (:func:`theory.li2024.factorized_claims.gd_decide`)
    reads the run as settled; the residuals of its last three increments (the rule's own is the last)."""
    space = fc._space(an)
    out = []
    for top in fc.gd_budgets(int(checkpoints[-1].step)):
        if top < fc.GD_MIN_STEPS:
            continue
        cps = [c for c in checkpoints if c.step <= top]
        v = fc.gd_decide(cps, p, an, target)
        if not v.measures.get("settled"):
            continue
        _, _, _, incs = fc.gd_errors(cps, space, target)
        kkt = [fc.stationarity_residual(inc, p, an.graphs) for inc in incs[-3:-1]] + [v.measures["kkt_residual"]]
        out.append({"problem": name, "kind": kind, "budget": top, "e_last": v.measures["e_last"],
                    "stall": v.measures["stall"], "c": [v.measures["c_prev"], v.measures["c_last"]], "kkt": kkt,
                    "kkt_ratio": kkt[-1] / kkt[0]})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=12)
    ap.add_argument("--steps", type=int, default=fc.GD_MAX_STEPS)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    marks = fc.decade_marks(args.steps)
    table = []
    start = time.perf_counter()
    for name, p, widths in list(sweep_problems()) + drawn_problems(args.draws):
        an, nuc = analyze(p), nuclear_svm(p)
        for m in widths:
            cps = train_factorized(p, args.steps, m, seed=0, checkpoints=marks).checkpoints
            table += rows(f"{name} m={m}", "valid", cps, p, an, nuc.W)
        cps = train(p, args.steps, safe_step(p), checkpoints=marks).checkpoints
        table += rows(name, "planted", cps, p, an, nuc.W)
        print(f"{time.perf_counter() - start:7.1f}s {name}", flush=True)
    for r in table:
        print(f"{r['kind']:8s} {r['problem']:28s} {r['budget']:>9d} e {r['e_last']:.3f} kkt "
              f"{' '.join(f'{k:.4f}' for k in r['kkt'])} ratio {r['kkt_ratio']:.3f}")
    for kind in ("valid", "planted"):
        got = [r for r in table if r["kind"] == kind]
        if got:
            print(f"{kind}: {len(got)} settled run-budgets; kkt_last {min(r['kkt'][-1] for r in got):.4f}-"
                  f"{max(r['kkt'][-1] for r in got):.4f}; two-decade ratio {min(r['kkt_ratio'] for r in got):.3f}-"
                  f"{max(r['kkt_ratio'] for r in got):.3f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(table, fh, indent=1)


if __name__ == "__main__":
    main()
