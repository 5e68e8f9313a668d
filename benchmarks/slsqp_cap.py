"""The regularization path's SLSQP iteration cap (``theory.li2024.regpath.SLSQP_MAXITER``) against 500.

    .venv/bin/python benchmarks/slsqp_cap.py [--examples 40] [--seed 12345] [--against 500]

Draws exp- and square-loss problems as the Theorem 2 property does (non-convex losses: six SLSQP starts per
radius), solves each path at the property's radii with both caps, and prints one JSON line per problem:
the outcome of each (``ok`` or the exception's name), the wall time of each, the largest relative
difference between the certified ``W̄_R``, and whether it is within the sum of the two certified position
errors (``certificate["error_bound"]``) at every radius.  Results: benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import theory.li2024.regpath as rp  # noqa: E402
from properties.li2024.runs import NONZERO_SVM, REGPATH_CONDITION  # noqa: E402
from strategies import drawn_problems  # noqa: E402
from theory.li2024.analysis import analyze  # noqa: E402
from theory.li2024.regpath_verdict import radii_for  # noqa: E402
from theory.li2024.svm import SolverError  # noqa: E402


def _path(problem, radii, cap):
    old, rp.SLSQP_MAXITER = rp.SLSQP_MAXITER, cap
    t = time.perf_counter()
    try:
        return rp.regularization_path(problem, radii), time.perf_counter() - t, "ok"
    except Exception as exc:  # the outcome is the measurement
        return None, time.perf_counter() - t, type(exc).__name__
    finally:
        rp.SLSQP_MAXITER = old


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=40)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--against", type=int, default=500)
    args = ap.parse_args()
    cap = rp.SLSQP_MAXITER
    rows = []

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(dp=drawn_problems(structures=NONZERO_SVM, max_condition=REGPATH_CONDITION,
                             loss=st.sampled_from(["exp", "square"])))
    def run(dp):
        p = dp.problem
        try:
            an = analyze(p)
        except SolverError:
            return
        radii = radii_for(p, an)
        a, ta, sa = _path(p, radii, args.against)
        b, tb, sb = _path(p, radii, cap)
        diff = bound = None
        if a and b:  # the distance between the two answers, and the sum of their certified position errors
            diff = max(np.linalg.norm(x.W - y.W) / max(np.linalg.norm(x.W), 1e-300) for x, y in zip(a, b))
            bound = max((x.certificate["error_bound"] + y.certificate["error_bound"]) / max(np.linalg.norm(x.W), 1e-300)
                        for x, y in zip(a, b))
        rows.append(dict(loss=p.loss, K=p.K, against=sa, cap=sb, t_against=round(ta, 2), t_cap=round(tb, 2),
                         diff=diff, within_bounds=None if diff is None else bool(diff <= bound)))
        print(json.dumps(rows[-1]), flush=True)

    run()
    same = sum(r["against"] == r["cap"] for r in rows)
    diffs = [r["diff"] for r in rows if r["diff"] is not None]
    within = sum(bool(r["within_bounds"]) for r in rows)
    print(f"{len(rows)} paths: same outcome {same}; certified both ways {len(diffs)}, identical {diffs.count(0.0)}, "
          f"within the two certified position errors {within}, "
          f"largest difference {max(diffs, default=float('nan')):.2g}; {sum(r['t_against'] for r in rows):.0f} s "
          f"at {args.against} iterations, {sum(r['t_cap'] for r in rows):.0f} s at {cap}")


if __name__ == "__main__":
    main()
