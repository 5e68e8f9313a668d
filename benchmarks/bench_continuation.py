"""Steps-equivalent per second: the log-time continuation against discrete GD (compiled engine) on the same problems.

    .venv/bin/python benchmarks/bench_continuation.py [--rounds R] [--start STEPS] [--markdown] [--problems a.json ...]
    .venv/bin/python benchmarks/bench_continuation.py --margins [--random N] [--markdown]

``--margins``: Theorem 1's reject-zone statistics at each horizon the decisions now reach (GD's first budget,
then the continuation to 10^12 steps-equivalent, :class:`theory.li2024.continuation.Escalation`), on valid runs
and on the planted violations, as the decision sees them at a budget ``H`` with the verdict at ``H/10`` before
it (:func:`theory.li2024.criteria.theorem1`): the worst valid and the mildest planted value per statistic and
horizon (the margins table of ``benchmarks/RESULTS.md``).  Valid runs: the stress-found Theorem 1 examples
(``HORIZON_EXAMPLES``, each from its own start) and ``--random`` problems of the ``theorem1-phase`` sweep's kind
(``theory.run.sweep.valid_problem``, K = 3..6, condition 1..100, seeded).  Plants: targets 15°, 20°, 35° off
``W^svm`` (3 seeds each), ``W^fin`` moved by 4 ``FINITE_MAX max(1, ||W^fin||)`` inside S_fin, the run stalled
at a tenth of the budget before (``W`` held from ``H/100``), and polynomial growth (the ``W^svm`` coefficient
replaced by ``c(τ₁) (τ/τ₁)^0.35``).

For each problem (log loss, Assumptions 1-2, ``W^svm != 0``; default a few ``examples/`` files of every shape,
and three of Section 5's, ``SECTION5_PROBLEMS``, at Section 5's step, where the continuation's right-hand side is
the numpy one with the Hessian of Grönwall's factor): discrete GD (``train(..., engine="auto")``, the compiled
engine, warmed up) runs from 0 to ``--start`` steps at the safe step; from that state

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
from theory.li2024.local_convergence import section5_step  # noqa: E402
from theory.li2024.losses import safe_step  # noqa: E402
from theory.li2024.training import resume, train, truncate  # noqa: E402

PROBLEMS = ["theorem1_slow_direction", "theorem1_direction_constant", "scc_above_token",
            "theorem1_finite_error_crossing", "theorem1_direction_transient_peak", "li_cyclic_trial0",
            "gaussian_cond_1.8e4"]
# Section 5's (non-convex: numpy right-hand side with the Hessian; the last column is then 1 by construction).
SECTION5_PROBLEMS = ["section5_persistent_misalignment", "section5_counterexample", "section5_log_broken_head"]
MID, FAR = 10**6, 10**12


def measure(path: str, start: int, rounds: int) -> dict:
    p = Problem.load(path)
    convex = p.loss == "log" and p.assumptions()["head_biorthogonal"]
    an = analyze(p) if convex else None
    # Section 5's problems (another loss, or a head that breaks Assumption 1) at Section 5's step; the
    # continuation's right-hand side is the numpy one there (with the Hessian for Grönwall's factor).
    eta = safe_step(p) if convex else section5_step(p).eta
    first = train(p, start, eta, analysis=an, engine="auto")
    best = {"gd": np.inf, "mid": np.inf, "far": np.inf, "far_numpy": np.inf}
    continue_flow(p, first, first.final.step * 10)  # the compiled right-hand side's first call compiles it
    for _ in range(rounds):
        gd = resume(p, first, MID, engine="auto")
        best["gd"] = min(best["gd"], gd.seconds - first.seconds)  # resume adds the first run's seconds
        mid = continue_flow(p, first, MID)
        best["mid"] = min(best["mid"], mid.continuation_seconds)
        far = continue_flow(p, first, FAR)
        best["far"] = min(best["far"], far.continuation_seconds)
        slow = continue_flow(p, first, FAR, compiled=False) if convex else far  # the kernel's baseline
        best["far_numpy"] = min(best["far_numpy"], slow.continuation_seconds)
    at = {c.step: c for c in gd.checkpoints}
    rel = float(np.linalg.norm(mid.final.W - at[MID].W) / np.linalg.norm(at[MID].W))
    span_mid, span_far = MID - start, FAR - start
    return {"problem": os.path.basename(path).removesuffix(".json") + ("" if convex else f" ({p.loss}, Section 5)"),
            "K": p.K, "queries": len(set(p.queries.tolist())), "dim_sfin": an.space.dim if convex else "-", "gd_rate": span_mid / best["gd"], "gd_seconds": best["gd"],
            "mid_evals": mid.nfev, "mid_jacs": mid.njev, "mid_rate": span_mid / best["mid"],
            "far_evals": far.nfev, "far_jacs": far.njev, "far_seconds": best["far"], "far_rate": span_far / best["far"],
            "far_numpy_evals": slow.nfev, "far_numpy_seconds": best["far_numpy"], "rel_w": rel}


def table(rows, start) -> str:
    out = [f"| problem | K | queries | dim S_fin | GD steps/s ({start:.0e} → 1e6) | continuation to 1e6: evals (Jacobians) | "
           "steps-eq/s | × GD | continuation to 1e12: evals (Jacobians) | seconds | steps-eq/s | × GD | "
           "‖ΔW‖/‖W‖ at 1e6 | to 1e12 on the numpy right-hand side: evals, seconds | compiled × numpy |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['problem']} | {r['K']} | {r['queries']} | {r['dim_sfin']} | {r['gd_rate']:.3g} | "
                   f"{r['mid_evals']} ({r['mid_jacs']}) | {r['mid_rate']:.3g} | {r['mid_rate'] / r['gd_rate']:.3g} | "
                   f"{r['far_evals']} ({r['far_jacs']}) | {r['far_seconds']:.3g} | {r['far_rate']:.3g} | "
                   f"{r['far_rate'] / r['gd_rate']:.3g} | {r['rel_w']:.2g} | {r['far_numpy_evals']}, "
                   f"{r['far_numpy_seconds']:.3g} | {r['far_numpy_seconds'] / r['far_seconds']:.3g} |")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------
# Margins at the continuation's horizons
# ------------------------------------------------------------------------------------------------
# (file, W(0)): the stress-found valid Theorem 1 cases, from the starts the properties use.
SLOW_DIRECTION_W0 = [[0.1727921, 0.41080907, 0.16521854, -0.65157862], [0.45267793, 0.22318729, -0.26847662, 0.29055905],
                     [0.1822862, 0.14706625, 0.01421112, 0.27335649], [-0.36822704, -0.08145497, -0.24105966, 0.29942311]]
HORIZON_EXAMPLES = [("theorem1_slow_direction", SLOW_DIRECTION_W0), ("theorem1_direction_transient_peak", None),
                    ("theorem1_direction_constant", None), ("theorem1_degenerate_correlation_dip", "rng0x0.1"),
                    ("theorem1_finite_error_crossing", None), ("li_cyclic_trial0", None), ("scc_above_token", None),
                    ("gaussian_cond_1.8e4", None), ("automaton_clipped_budget", None)]
ANGLES = (15.0, 20.0, 35.0)
POLY = 0.35


def _start(p, spec):
    if spec is None:
        return np.zeros((p.d, p.d))
    if spec == "rng0x0.1":
        return 0.1 * np.random.default_rng(0).normal(size=(p.d, p.d))
    return np.asarray(spec, dtype=float)


def horizon_run(p, W0):
    """``(analysis, run, first)``: GD to Theorem 1's first budget, then the continuation to the last budget of
    the ladder to 10^12 (None when the budget exceeds MAX_STEPS or the continuation failed its check)."""
    from theory.li2024 import criteria
    from theory.li2024.continuation import CONTINUE_MAX_STEPS, Escalation

    an = analyze(p)
    eta = safe_step(p)
    steps, need = criteria.run_budget(an, eta, W0)
    if need > criteria.MAX_STEPS or an.finite is None:
        return an, None, steps
    gd = train(p, steps, eta, W0=W0, analysis=an)
    esc = Escalation(p, an)
    if not esc.check(gd)[0]:
        print(f"  continuation refused: {esc.disagreement(gd)}", file=sys.stderr)
        return an, None, steps
    for far in reversed(criteria.budgets(steps, CONTINUE_MAX_STEPS)[1:]):
        try:  # the furthest budget the continuation reaches (a failure ends a decision there too)
            return an, continue_flow(p, gd, far, an), steps
        except FloatingPointError as exc:
            print(f"  continuation to {far:.3g} failed: {exc}", file=sys.stderr)
    return an, None, steps


def held(run, at):
    """``run`` with ``W`` held from step ``at`` on (a finite limit: the stalled plant)."""
    from dataclasses import replace

    from theory.li2024.criteria import _at

    hold = _at(run, at)
    return replace(run, checkpoints=[c if c.step <= hold.step else replace(hold, step=c.step) for c in run.checkpoints])


def polynomial(run, an, first, p=POLY):
    """``run`` with its ``W^svm`` coefficient replaced by ``c(τ₁) (τ/τ₁)^p`` (polynomial growth)."""
    from dataclasses import replace

    from theory.li2024.criteria import _at

    Wh = an.svm.W / an.svm.norm
    c1 = float(np.sum(_at(run, first).W * Wh))

    def moved(c):
        W = c.W + (c1 * (max(c.step, 1) / first) ** p - float(np.sum(c.W * Wh))) * Wh
        return replace(c, W=W)
    return replace(run, checkpoints=[moved(c) for c in run.checkpoints])


def pair(run, target, H):
    """Theorem 1's verdict at budget ``H`` with the verdict at ``H/10`` before it."""
    from theory.li2024 import criteria

    earlier = criteria.theorem1(truncate(run, H // 10), target)
    return criteria.theorem1(truncate(run, H), target, earlier)


def horizon_rows(p, W0, label):
    """Per horizon ``H`` (first budget x 10^k, k >= 1): the statistics of the valid run and of each plant."""
    from dataclasses import replace

    from theory.li2024 import criteria
    from theory.li2024.plants import wrong_direction

    an, run, first = horizon_run(p, W0)
    if run is None:
        return []
    targets = {f"{a:g}°": [replace(an, svm=replace(an.svm, W=an.svm.norm * wrong_direction(an, a, seed)))
                           for seed in range(3)] for a in ANGLES}
    fin = []
    if an.space.dim:
        size = 4 * criteria.FINITE_MAX * max(1.0, float(np.linalg.norm(an.finite.W)))
        shift = an.space.compose(np.ones(an.space.dim) / np.sqrt(an.space.dim)) * size
        fin = [replace(an, finite=replace(an.finite, W=an.finite.W + shift))]
    poly = polynomial(run, an, first)
    rows = []
    for H in criteria.budgets(first, run.final.step)[1:]:
        v = pair(run, an, H)
        m = v.measures
        row = {"problem": label, "H": H, "L": m["log_time"], "valid_outcome": v.outcome.value,
               "valid_gamma": m.get("direction_trend") if m["direction_rate"] > criteria.DIRECTION_RATE else None,
               "valid_rate": m["direction_rate"],
               "valid_growth": abs(np.log(m["growth_ratio"])) if 0 < m["growth_ratio"] < np.inf else np.inf,
               "valid_finite": m["finite_error"] / m["finite_error_prev"]
               if m["finite_error"] > criteria.FINITE_FLOOR and m["finite_error_prev"] > 0 else None}
        for name, ts in targets.items():
            vs = [pair(run, t, H) for t in ts]
            # the trend decides only above DIRECTION_RATE (below it the rate accepts): the mildest γ there
            row[f"gamma_{name}"] = min((x.measures["direction_trend"] for x in vs
                                        if x.measures["direction_rate"] > criteria.DIRECTION_RATE), default=None)
            row[f"fails_{name}"] = sum(x.outcome.value == "fails" for x in vs)
            row[f"resolved_{name}"] = sum(x.measures["direction_rate"] > criteria.DIRECTION_RATE for x in vs)
        if fin:
            x = pair(run, fin[0], H)
            row["finite_planted"] = x.measures["finite_error"] / x.measures["finite_error_prev"]
            row["fails_finite"] = x.outcome.value == "fails"
        x = pair(held(run, H // 100), an, H)
        row["fails_stalled"], row["stalled_ratio"] = x.outcome.value == "fails", x.measures["growth_ratio"]
        x = pair(poly, an, H)
        r = x.measures["growth_ratio"]
        row["poly_growth"] = abs(np.log(r)) if 0 < r < np.inf else np.inf
        row["fails_poly"] = x.outcome.value == "fails"
        rows.append(row)
    return rows


def decision_rows(p, W0, label):
    """Theorem 1's decisions from the first budget, escalated through the continuation (Escalation) and on GD
    alone (``resume``, cap ESCALATE_MAX_STEPS): the true targets and every planted target, with wall time."""
    import time
    from dataclasses import replace

    from theory.li2024 import criteria
    from theory.li2024.continuation import Escalation
    from theory.li2024.plants import wrong_direction

    an = analyze(p)
    eta = safe_step(p)
    steps, need = criteria.run_budget(an, eta, W0)
    if need > criteria.MAX_STEPS or an.finite is None:
        return []
    gd = train(p, steps, eta, W0=W0, analysis=an)
    plants = {f"{a:g}°": [replace(an, svm=replace(an.svm, W=an.svm.norm * wrong_direction(an, a, seed)))
                          for seed in range(3)] for a in ANGLES}
    if an.space.dim:
        size = 4 * criteria.FINITE_MAX * max(1.0, float(np.linalg.norm(an.finite.W)))
        shift = an.space.compose(np.ones(an.space.dim) / np.sqrt(an.space.dim)) * size
        plants["W^fin"] = [replace(an, finite=replace(an.finite, W=an.finite.W + shift))]
    rows = []
    for engine in ("continuation", "gd"):
        if engine == "continuation":
            extend = Escalation(p, an)
        else:
            def extend(run, n, cache={}):
                if n not in cache:
                    cache[n] = resume(p, run, n, analysis=an)
                return cache[n]
        t = time.perf_counter()
        truth, rec = criteria.theorem1_decide(gd, an, extend)
        seconds = time.perf_counter() - t
        row = {"kind": "decision", "problem": label, "engine": engine, "truth": truth.outcome.value,
               "budget": truth.budget, "seconds": seconds,
               "engines": sorted({str(x.get("engine", "gd"))[:12] for x in truth.trail})}
        row["gamma_valid"] = max(criteria.deciding_trends(truth), default=None)
        for name, ts in plants.items():
            ext = Escalation(p, an, recorded=rec) if engine == "continuation" else extend
            vs = [criteria.theorem1_decide(gd, t, ext)[0] for t in ts]
            row[name] = [v.outcome.value for v in vs]
            row[f"gamma {name}"] = [g[-1] for g in map(criteria.deciding_trends, vs) if g]
        rows.append(row)
    return rows


def decisions_table(rows) -> str:
    """Per engine: the true targets' outcomes, budgets and time; each plant's outcomes."""
    out = ["| escalation | runs | valid holds / undecided / fails | last budget (median, max) | seconds (sum) | "
           "15° fails / undecided / holds | 20° | 35° | W^fin moved | γ where it decided: worst valid / mildest "
           "planted 15° / 20° / 35° |", "|---|---|---|---|---|---|---|---|---|---|"]
    for engine in ("gd", "continuation"):
        rs = [r for r in rows if r["engine"] == engine]
        if not rs:
            continue
        cnt = lambda xs: " / ".join(str(sum(x == o for x in xs)) for o in ("fails", "undecided", "holds"))  # noqa: E731
        valid = [r["truth"] for r in rs]
        budgets = sorted(r["budget"] for r in rs)
        planted = [cnt([o for r in rs for o in r.get(k, [])]) for k in ("15°", "20°", "35°", "W^fin")]
        name = "GD only (cap 1e7)" if engine == "gd" else "continuation (to 1e12)"
        gv = [r["gamma_valid"] for r in rs if r.get("gamma_valid") is not None]
        gp = [min((g for r in rs for g in r.get(f"gamma {a}", [])), default=None) for a in ("15°", "20°", "35°")]
        fmt = lambda x: "–" if x is None else f"{x:.3g}"  # noqa: E731
        out.append(f"| {name} | {len(rs)} | {' / '.join(str(valid.count(o)) for o in ('holds', 'undecided', 'fails'))} | "
                   f"{budgets[len(budgets) // 2]:.3g}, {budgets[-1]:.3g} | {sum(r['seconds'] for r in rs):.3g} | "
                   + " | ".join(planted) + f" | {fmt(max(gv, default=None))} / {' / '.join(map(fmt, gp))} |")
    return "\n".join(out)


def margins_table(rows) -> str:
    """One line per horizon (decade of H): worst valid against mildest planted, per statistic."""
    from theory.li2024 import criteria

    def worst(xs, f):
        xs = [x for x in xs if x is not None and np.isfinite(x)]
        return f"{f(xs):.3g}" if xs else "–"

    out = ["| horizon (steps) | runs | L = ln(τ/τ₀) | valid: fails / undecided | γ worst valid (rate > 3) | "
           "γ mildest planted (rate > 3) 15° / 20° / 35° | planted rejected 15° / 20° / 35° (rate > 3) | valid rate max | "
           "finite decade ratio worst valid / mildest planted | growth \\|ln ratio\\| worst valid / polynomial | "
           "stalled, polynomial rejected |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in sorted({int(round(np.log10(r["H"]))) for r in rows}):
        rs = [r for r in rows if int(round(np.log10(r["H"]))) == e]
        n = len(rs)
        fails = sum(r["valid_outcome"] == "fails" for r in rs)
        und = sum(r["valid_outcome"] == "undecided" for r in rs)
        gam = " / ".join(worst([r[f"gamma_{a:g}°"] for r in rs], min) for a in ANGLES)
        rej = " / ".join(f"{sum(r[f'fails_{a:g}°'] for r in rs)}/{3 * n} ({sum(r[f'resolved_{a:g}°'] for r in rs)})"
                         for a in ANGLES)
        fin_rows = [r for r in rs if "finite_planted" in r]
        out.append(f"| 1e{e} | {n} | {min(r['L'] for r in rs):.1f}-{max(r['L'] for r in rs):.1f} | {fails} / {und} | "
                   f"{worst([r['valid_gamma'] for r in rs], max)} | {gam} | {rej} | "
                   f"{worst([r['valid_rate'] for r in rs], max)} | {worst([r['valid_finite'] for r in rs], max)} / "
                   f"{worst([r['finite_planted'] for r in fin_rows], min)} ({sum(r['fails_finite'] for r in fin_rows)}/{len(fin_rows)} rejected) | "
                   f"{worst([r['valid_growth'] for r in rs], max)} / {worst([r['poly_growth'] for r in rs], min)} | "
                   f"{sum(r['fails_stalled'] for r in rs)}/{n}, {sum(r['fails_poly'] for r in rs)}/{n} |")
    return "\n".join(out)


def margins(random: int, markdown: bool, rows_from: str | None = None):
    from theory.run.sweep import valid_problem

    if rows_from:  # the table again from the JSON lines an earlier run printed
        import json

        rows = [json.loads(line) for line in open(rows_from)]
        print(margins_table([r for r in rows if r.get("kind") != "decision"]))
        print()
        print(decisions_table([r for r in rows if r.get("kind") == "decision"]))
        return
    rows = []
    cases = [(name, Problem.load(f"examples/{name}.json"), spec) for name, spec in HORIZON_EXAMPLES]
    for seed in range(random):
        rng = np.random.default_rng([37, seed])
        K, cond = 3 + seed % 4, float(10 ** (2 * rng.random()))
        cases.append((f"random {seed} (K={K}, cond {cond:.3g})", valid_problem(rng, K, cond), None))
    for name, p, spec in cases:
        rows += horizon_rows(p, _start(p, spec), name)
        rows += decision_rows(p, _start(p, spec), name)
        print(f"{name}: {len(rows)} rows", file=sys.stderr)
    print(f"{len(rows)} rows", file=sys.stderr)
    if markdown:
        print(margins_table([r for r in rows if r.get("kind") != "decision"]))
        print()
        print(decisions_table([r for r in rows if r.get("kind") == "decision"]))
    else:
        import json

        for r in rows:
            print(json.dumps({k: (float(v) if isinstance(v, (np.floating, float)) else v) for k, v in r.items()}))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--start", type=int, default=10**5)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--problems", nargs="*", default=[f"examples/{n}.json" for n in PROBLEMS + SECTION5_PROBLEMS])
    ap.add_argument("--margins", action="store_true", help="the margins table at the continuation's horizons")
    ap.add_argument("--random", type=int, default=20, help="--margins: random valid problems besides the examples")
    ap.add_argument("--rows", help="--margins: print the table from the JSON lines of an earlier run")
    a = ap.parse_args(argv)
    if a.margins:
        margins(a.random, a.markdown, a.rows)
        return
    warm_up()
    rows = [measure(path, a.start, a.rounds) for path in a.problems]
    if a.markdown:
        print(table(rows, a.start))
    else:
        for r in rows:
            print(r)


if __name__ == "__main__":
    main()
