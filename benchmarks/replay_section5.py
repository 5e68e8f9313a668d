"""Replay a Section 5 case in float64 (compiled engine) and with 50-digit gradients (theory.core.exact.gd_extended)
and print the statistics that ``properties/li2024/test_section5.py`` judges, side by side: the pseudo-TPG at τ/10
and τ, whether the selection settled, and the incremental direction against the pseudo-TPG Graph-SVM.

    python benchmarks/replay_section5.py examples/section5_counterexample.json [--steps 200000]

(~1.2 ms per 50-digit step at K = 3: about 4 minutes for 2e5 steps.)
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from theory.li2024 import criteria
from theory.li2024.analysis import analyze
from theory.li2024.losses import TokenData, safe_step
from theory.core.problem import Problem
from theory.li2024.pseudo import pseudo_svm, pseudo_tpgs
from theory.li2024.training import run_gd


def stats(p, Ws, steps):
    early, mid, end = Ws
    ps = pseudo_svm(p, end)
    earlier = pseudo_tpgs(p, mid)
    settled = (earlier[1] == 0 and ps.ambiguous == 0
               and {k: g.edges for k, g in earlier[0].items()} == {k: g.edges for k, g in ps.graphs.items()})
    u = ps.svm.W / ps.svm.norm
    g1, g0 = np.sum((end - mid) * u), np.sum((mid - early) * u)
    inc = float(np.sum((end - mid) * ps.svm.W) / (np.linalg.norm(end - mid) * ps.svm.norm))
    tan = np.sqrt(max(0.0, 1 / inc**2 - 1)) if inc > 0 else np.inf
    rate = float(tan * np.log(max(steps / criteria.time_unit(ps.svm.norm, safe_step(p)), np.e)))
    return {"pseudo_edges": {k: sorted(g.edges) for k, g in ps.graphs.items()}, "settled": bool(settled),
            "growth_ratio": float(g1 / g0) if g0 > 0 else None, "incremental_corr": inc, "direction_rate": rate,
            "passes": bool(rate <= criteria.DIRECTION_RATE), "W_end": end.tolist()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--steps", type=int, default=200_000)
    args = ap.parse_args()
    p = Problem.load(args.file)
    data = TokenData.from_problem(p)
    eta = safe_step(p)
    cps = [0, args.steps // 100, args.steps // 10, args.steps]
    out = {}
    for engine in ("compiled", "extended"):
        t = time.perf_counter()
        B, _ = run_gd(np.zeros((p.K, p.K)), data, p.gram, eta, cps, False, engine)
        Ws = [-p.E.T @ b @ p.E for b in B[1:]]
        out[engine] = stats(p, Ws, args.steps)
        out[engine]["seconds"] = time.perf_counter() - t
        print(f"{engine}: done in {out[engine]['seconds']:.0f} s", file=sys.stderr)
    out["max_abs_W_difference"] = float(np.abs(np.array(out["compiled"]["W_end"]) - np.array(out["extended"]["W_end"])).max())
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
