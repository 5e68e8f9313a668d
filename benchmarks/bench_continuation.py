"""Steps-equivalent per second: the log-time continuation against discrete GD (compiled engine) on the same problems.

    .venv/bin/python benchmarks/bench_continuation.py [--rounds R] [--start STEPS] [--markdown] [--problems a.json ...]

For each problem (log loss, Assumptions 1-2, ``W^svm != 0``; default a few ``examples/`` files of every shape):
discrete GD (``train(..., engine="auto")``, the compiled engine, warmed up) runs from 0 to ``--start`` steps at
the safe step; from that state

* discrete GD goes on to 10^6 steps (``resume``): its rate is the steps taken over the seconds of its loop;
* the continuation (:func:`theory.li2024.continuation.continue_flow`, LSODA, rtol 1e-10) goes to 10^6 and to
  10^12 steps-equivalent: its rate is the steps covered over the seconds of the solve.

Both sides time their loop only (checkpoint metrics excluded: ``Trajectory.seconds`` of the resumed part and
``ContinuedTrajectory.continuation_seconds``, wall clock, one thread), best of ``--rounds`` interleaved rounds:
on a shared 2-core machine a core's speed drifts within a minute (benchmarks/bench_gd.py's docstring), and
each ratio's two sides are measured in the same round.  The last column is the continuation's relative distance to GD in
``W`` at 10^6 steps (issue 37 measured 7.4e-8 on the slow-direction case).
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from theory.core.problem import Problem  # noqa: E402
from theory.li2024.analysis import analyze  # noqa: E402
from theory.li2024.continuation import continue_flow  # noqa: E402
from theory.li2024.engine import warm_up  # noqa: E402
from theory.li2024.losses import safe_step  # noqa: E402
from theory.li2024.training import resume, train  # noqa: E402

PROBLEMS = ["theorem1_slow_direction", "theorem1_direction_constant", "scc_above_token",
            "theorem1_finite_error_crossing", "theorem1_direction_transient_peak", "li_cyclic_trial0",
            "gaussian_cond_1.8e4"]
MID, FAR = 10**6, 10**12


def measure(path: str, start: int, rounds: int) -> dict:
    p = Problem.load(path)
    an = analyze(p)
    eta = safe_step(p)
    first = train(p, start, eta, analysis=an, engine="auto")
    best = {"gd": np.inf, "mid": np.inf, "far": np.inf}
    for _ in range(rounds):
        gd = resume(p, first, MID, engine="auto")
        best["gd"] = min(best["gd"], gd.seconds - first.seconds)  # resume adds the first run's seconds
        mid = continue_flow(p, first, MID)
        best["mid"] = min(best["mid"], mid.continuation_seconds)
        far = continue_flow(p, first, FAR)
        best["far"] = min(best["far"], far.continuation_seconds)
    at = {c.step: c for c in gd.checkpoints}
    rel = float(np.linalg.norm(mid.final.W - at[MID].W) / np.linalg.norm(at[MID].W))
    span_mid, span_far = MID - start, FAR - start
    return {"problem": os.path.basename(path).removesuffix(".json"), "K": p.K, "queries": len(set(p.queries.tolist())),
            "dim_sfin": an.space.dim, "gd_rate": span_mid / best["gd"], "gd_seconds": best["gd"],
            "mid_evals": mid.nfev, "mid_jacs": mid.njev, "mid_rate": span_mid / best["mid"],
            "far_evals": far.nfev, "far_jacs": far.njev, "far_seconds": best["far"], "far_rate": span_far / best["far"],
            "rel_w": rel}


def table(rows, start) -> str:
    out = [f"| problem | K | queries | dim S_fin | GD steps/s ({start:.0e} → 1e6) | continuation to 1e6: evals (Jacobians) | "
           "steps-eq/s | × GD | continuation to 1e12: evals (Jacobians) | seconds | steps-eq/s | × GD | "
           "‖ΔW‖/‖W‖ at 1e6 |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['problem']} | {r['K']} | {r['queries']} | {r['dim_sfin']} | {r['gd_rate']:.3g} | "
                   f"{r['mid_evals']} ({r['mid_jacs']}) | {r['mid_rate']:.3g} | {r['mid_rate'] / r['gd_rate']:.3g} | "
                   f"{r['far_evals']} ({r['far_jacs']}) | {r['far_seconds']:.3g} | {r['far_rate']:.3g} | "
                   f"{r['far_rate'] / r['gd_rate']:.3g} | {r['rel_w']:.2g} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--start", type=int, default=10**5)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--problems", nargs="*", default=[f"examples/{n}.json" for n in PROBLEMS])
    a = ap.parse_args(argv)
    warm_up()
    rows = [measure(path, a.start, a.rounds) for path in a.problems]
    if a.markdown:
        print(table(rows, a.start))
    else:
        for r in rows:
            print(r)


if __name__ == "__main__":
    main()
