"""The direction trend's resolution at the extended horizon: planted targets against the escalated line.

    .venv/bin/python benchmarks/trend_resolution.py [--top 2e15] [--seeds 8] [--markdown] [FILE ...]

Section 5's horizon accepts a direction above ``DIRECTION_RATE`` by its trend: ``γ <= TREND_HOLD`` with the rate
at most ``DIRECTION_RATE_ESCALATED`` (:func:`theory.li2024.criteria.direction_zone`).  A valid draw whose rate
levels off above that line (``examples/section5_trend_between_the_lines.json``: 7.60 at 2e15) is undecided at
every budget.  Whether the line could move is a question about planted targets, which this script measures: each
FILE is run as the verdict runs it (GD, then the first-order continuation with the path bound in extended
precision, :data:`theory.li2024.local_continuation.EXTENDED`, to ``--top`` steps-equivalent), and at every
decade's budget from 2e12 (each the ladder's last budget of some extension) the increment's rate and its trend
over the decade before are read against the pseudo-TPG's Graph-SVM at the top (the valid target) and against
targets ``10°, 15°, 20°, 35°`` off it (:func:`theory.li2024.plants.wrong_direction`, ``--seeds`` each).

Printed: per file and budget, the rate, ``tan θ`` and ``γ`` against the pseudo-TPG's own target and the zone's
verdict (:func:`theory.li2024.criteria.direction_zone` with its log time); per angle, how many planted targets the
zone accepts, and the least ``tan θ`` of the targets whose trend is ``γ <= TREND_HOLD`` and of those whose trend is
level (``|γ| <= TREND_HOLD``, what ``DIRECTION_LEVEL_TAN`` is calibrated against).  Nominal rates (the continued
``W`` itself, not the interval over ``W`` within its bound).  Results: benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from properties.li2024.runs import extended_horizon, horizon_rates  # noqa: E402
from theory.core.decision import ACCEPT  # noqa: E402
from theory.li2024 import criteria  # noqa: E402
from theory.li2024.plants import wrong_direction  # noqa: E402
from theory.li2024.training import truncate  # noqa: E402

FILES = ["examples/section5_trend_between_the_lines.json", "examples/section5_persistent_misalignment.json",
         "examples/section5_converging_past_the_extension.json", "examples/section5_converging_at_the_rounding_floor.json",
         "examples/section5_slow_direction_at_horizon.json", "examples/section5_misaligned_at_horizon.json",
         "examples/section5_converging_past_horizon.json", "examples/section5_raw_correlation_lags_transit.json"]
ANGLES = (10, 15, 20, 35)


def _gamma(before, after) -> float:
    (r1, l1), (r2, l2) = before, after
    return criteria.direction_trend({"direction_rate": r1, "log_time": l1}, {"direction_rate": r2, "log_time": l2})


def _pair(run, b, target, eta):
    """``[(rate, L) a decade before b, (rate, L) at b]`` against ``target`` (``L = ln(τ/τ₀)``)."""
    norm = float(np.linalg.norm(target))
    return [(rate, criteria.log_time(n, norm, eta)) for n, rate in horizon_rates(truncate(run, b), target, eta)]


def measure(path: str, top: int, seeds: int) -> list[dict]:
    p, run, ps, eta, reached = extended_horizon(path, top)
    an = types.SimpleNamespace(problem=p, svm=ps.svm)
    targets = {a: [wrong_direction(an, a, s) * ps.svm.norm for s in range(seeds)] for a in ANGLES}
    rows = []
    for b in (b for b in reached if b >= 2 * 10**12):
        valid = _pair(run, b, ps.svm.W, eta)
        row = {"file": os.path.basename(path), "steps": b, "rate": valid[1][0], "L": valid[1][1],
               "gamma": _gamma(*valid)}
        row["zone"] = criteria.direction_zone(row["rate"], row["gamma"], log_time=row["L"])
        for a in ANGLES:
            accepted, held, level = 0, [], []
            for T in targets[a]:
                pair = _pair(run, b, T, eta)
                g, tan = _gamma(*pair), pair[1][0] / pair[1][1]
                accepted += criteria.direction_zone(pair[1][0], g, log_time=pair[1][1]) == ACCEPT
                if g <= criteria.TREND_HOLD:
                    held.append(tan)
                    if g >= -criteria.TREND_HOLD:
                        level.append(tan)
            row[a] = (accepted, min(held, default=float("nan")), min(level, default=float("nan")))
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=FILES)
    ap.add_argument("--top", type=float, default=2e15)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    rows = []
    for path in args.files:
        t = time.perf_counter()
        rows += measure(path, int(args.top), args.seeds)
        print(f"{path}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    head = ["file", "steps", "own target: rate, tan θ, γ (zone)"] + [f"{a}°: accepted; least tan θ, γ <= hold; and γ >= -hold"
                                                                    for a in ANGLES]
    lines = []
    for r in rows:
        cells = [r["file"].removeprefix("section5_").removesuffix(".json"), f"{r['steps']:.0e}",
                 f"{r['rate']:.2f}, {r['rate'] / r['L']:.3f}, {r['gamma']:.2f} ({r['zone']})"]
        cells += [f"{r[a][0]}/{args.seeds}; {r[a][1]:.3f}; {r[a][2]:.3f}" for a in ANGLES]
        lines.append(cells)
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for cells in lines:
            print("| " + " | ".join(cells) + " |")
    else:
        for cells in lines:
            print("  ".join(cells))
    for a in ANGLES:
        for k, what in ((1, "γ <= TREND_HOLD"), (2, "|γ| <= TREND_HOLD")):
            least = min((r[a][k] for r in rows if r[a][k] == r[a][k]), default=float("nan"))
            print(f"least tan θ of a {a}° target with {what}: {least:.3f} ({np.degrees(np.arctan(least)):.1f}°)")
    undecided = [r for r in rows if r["zone"] != ACCEPT and r["gamma"] <= criteria.TREND_HOLD]
    for r in undecided:
        print(f"converging (γ <= TREND_HOLD), not accepted: {r['file']} at {r['steps']:.0e}: rate {r['rate']:.2f}, "
              f"tan θ {r['rate'] / r['L']:.3f}, γ {r['gamma']:.2f}")


if __name__ == "__main__":
    main()
