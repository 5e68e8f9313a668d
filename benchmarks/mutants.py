"""Mutation testing of the suite: plausible bugs planted in ``theory/`` one at a time, the suite run on each.

    .venv/bin/python benchmarks/mutants.py [--profile ci] [--workers 2] [--maxfail N] [--only NAME ...] [--markdown]
                                           [--paths PATH ...]

Each mutant is one textual replacement in one file (checked to apply exactly once before anything runs).
For each, a detached git worktree of HEAD gets the replacement, the property suite runs there
(``pytest -q -rf``, the chosen profile, no report pruning of this checkout), and the table says whether
the mutant was killed, by how many and which properties, and how long it took.  The suite's claim is
that every mutant is killed by at least two properties (``KILL_MIN``); the exit status is 1 otherwise.

Not part of the CI run: a full pass is ~20 suite runs (about an hour on 2 cores).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KILL_MIN = 2


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    path: str
    old: str
    new: str


MUTANTS = [
    Mutant("tpg-reversed", "TPG edges point from the other tokens to the label", "theory/li2024/graphs.py",
           "g.add_edges_from((y, x) for x in set(seq) if x != y)",
           "g.add_edges_from((x, y) for x in set(seq) if x != y)"),
    Mutant("top-scc-lowest", "hard retrieval keeps the lowest-priority SCC", "theory/li2024/graphs.py",
           "best = min(tpg.component[t] for t in known)", "best = max(tpg.component[t] for t in known)"),
    Mutant("svm-margin-2", "Graph-SVM margins >= 2 instead of >= 1 (the ⇒ rows halved)", "theory/li2024/svm.py",
           "    A_in = np.array([_row(E, *p) for p in ineq]).reshape(len(ineq), d * d)",
           "    A_in = 0.5 * np.array([_row(E, *p) for p in ineq]).reshape(len(ineq), d * d)"),
    Mutant("svm-no-equalities", "Graph-SVM drops the (i ≍ j) equalities", "theory/li2024/svm.py",
           "        eq += [(k, comp[0], t) for comp in g.sccs for t in comp[1:]]", "        eq += []"),
    Mutant("svm-row-sign", "constraint rows (e_j - e_i) e_k^T", "theory/li2024/svm.py",
           "return np.outer(E[i] - E[j], E[k]).ravel()", "return np.outer(E[j] - E[i], E[k]).ravel()"),
    Mutant("sfin-generators", "S_fin spanned by the ⇒ rows instead of the ≍ rows", "theory/li2024/subspace.py",
           "gens = constraints(problem, graphs or token_priority_graphs(problem)).equal",
           "gens = constraints(problem, graphs or token_priority_graphs(problem)).dominate"),
    Mutant("wfin-unmasked", "W^fin minimizes the full loss, not the label-SCC-restricted one", "theory/li2024/finite.py",
           "m = label_scc_mask(problem, graphs) if mask is None else mask",
           "m = (problem.counts > 0).astype(float) if mask is None else mask"),
    Mutant("grad-scale", "score gradient off by a factor 2", "theory/li2024/losses.py",
           "    ds = a * (delta - mbar)", "    ds = 2.0 * a * (delta - mbar)"),
    Mutant("normalize-numpy", "normalized GD does not divide by ||grad|| (numpy engine)", "theory/li2024/training.py",
           "return eta / grad_norm if grad_norm > floor else 0.0", "return eta if grad_norm > floor else 0.0"),
    Mutant("normalize-compiled", "normalized GD does not divide by ||grad|| (compiled engine)", "theory/li2024/engine.py",
           "s = eta / gn if gn > floor else 0.0\n        for p in range(P):",
           "s = eta if gn > floor else 0.0\n        for p in range(P):"),
    Mutant("map-back", "W recovered from token space with the wrong sign", "theory/li2024/training.py",
           "W = W0 - E.T @ B @ E", "W = W0 + E.T @ B @ E"),
    Mutant("criterion-direction-off", "Theorem 1's direction check disabled", "theory/li2024/criteria.py",
           "    rate = direction_rate(inc, sn, traj.eta, end.step, gap)",
           "    rate = 0.0 * direction_rate(inc, sn, traj.eta, end.step, gap)"),
    # (Disabling only the magnitude branch, ``if fe > FINITE_MAX * fin_scale``, survived a dev-profile run:
    # every planted wrong W^fin is also caught by the decay branch.  The mutant disables the whole check.)
    Mutant("criterion-finite-off", "Theorem 1's finite-part check disabled", "theory/li2024/criteria.py",
           '    fe, fe_prev = m["finite_error"], m["finite_error_prev"]', "    fe, fe_prev = 0.0, 0.0"),
    Mutant("pseudo-threshold", "pseudo-TPG selects at mass > 0.1", "theory/li2024/pseudo.py",
           "SELECT, REJECT = 1e-2, 1e-2 - 1e-3", "SELECT, REJECT = 1e-1, 1e-1 - 1e-3"),
    Mutant("scansnap-rates-swapped", "Scan and Snap population GD with η_Y and η_Z swapped", "theory/tian2023/model.py",
           "return compiled(classes, steps, eta_y, eta_z, momentum, Y, Z)",
           "return compiled(classes, steps, eta_z, eta_y, momentum, Y, Z)"),
    Mutant("scansnap-rhs-rates", "Scan and Snap dynamics with η_Y and η_Z swapped", "theory/tian2023/model.py",
           "        ey, ez = eta_y, eta_z", "        ey, ez = eta_z, eta_y"),
    Mutant("regpath-radius", "regularization path solved at R/2", "theory/li2024/regpath.py",
           "    radii = sorted(float(R) for R in radii)", "    radii = sorted(float(R) / 2 for R in radii)"),
    Mutant("automaton-uniform", "automaton's limit attention uniform on the top SCC", "theory/li2024/automaton.py",
           "    return a * mask / (a * mask).sum()", "    return mask / mask.sum()"),
    # Decision constants: an accept threshold moved across its reject threshold (past the mildest planted
    # value measured), "any holds" for "all hold", and public strategies that ignore an option.  The CI
    # profile's theorem properties draw few examples far from the zones' edges and let these pass; the
    # unit tests of properties/core/test_criteria_constants.py, test_decision.py and the option tests of
    # properties/suite/test_strategies.py kill them (benchmarks/RESULTS.md, "Decision constants").
    Mutant("theorem1-trend-hold-past-fail", "Theorem 1's trend accepts γ <= 0.7 (reject >= 0.65)",
           "theory/li2024/criteria.py", "TREND_HOLD, TREND_FAIL = 0.5, 0.65", "TREND_HOLD, TREND_FAIL = 0.7, 0.65"),
    Mutant("theorem1-trend-any", "Theorem 1's trend accepts γ <= TREND_HOLD *or* a rate under the cap",
           "theory/li2024/criteria.py", "gamma <= TREND_HOLD and rate <= DIRECTION_RATE_ESCALATED:",
           "gamma <= TREND_HOLD or rate <= DIRECTION_RATE_ESCALATED:"),
    Mutant("level-trend-ignores-falling-rate", "the level clause accepts a rate falling fast (γ <= 0.5, no lower bound)",
           "theory/li2024/criteria.py", "abs(gamma) <= TREND_HOLD and rate <= DIRECTION_LEVEL_TAN * log_time",
           "gamma <= TREND_HOLD and rate <= DIRECTION_LEVEL_TAN * log_time"),
    Mutant("level-trend-any-angle", "the level clause accepts a level trend at any angle",
           "theory/li2024/criteria.py", "abs(gamma) <= TREND_HOLD and rate <= DIRECTION_LEVEL_TAN * log_time",
           "abs(gamma) <= TREND_HOLD"),
    Mutant("theorem1-growth-lo-past-reject", "Theorem 1's growth ratio accepted from 0.3 (reject < 0.5)",
           "theory/li2024/criteria.py", "GROWTH_LO, GROWTH_HI = 0.6, 1.25", "GROWTH_LO, GROWTH_HI = 0.3, 1.25"),
    Mutant("theorem1-growth-hi-past-reject", "Theorem 1's growth ratio accepted up to 2.5 (reject > 2)",
           "theory/li2024/criteria.py", "GROWTH_LO, GROWTH_HI = 0.6, 1.25", "GROWTH_LO, GROWTH_HI = 0.6, 2.5"),
    Mutant("theorem1-finite-decay-past-stall", "Theorem 1's finite error accepted at x1.0 per decade (reject >= x0.9)",
           "theory/li2024/criteria.py", "FINITE_DECAY = 0.5\n", "FINITE_DECAY = 1.0\n"),
    Mutant("theorem1-leak-accepts-growth", "Theorem 1's leak accepted while growing up to x2 (reject: growing)",
           "theory/li2024/criteria.py", "lambda lk: mass >= MASS_MIN and lk <= leak_prev + 1e-12",
           "lambda lk: mass >= MASS_MIN and lk <= 2 * leak_prev + 1e-12"),
    Mutant("finite-convergence-decay-past-stall", "W^svm = 0: moves accepted at x1.1 per decade (reject [0.8, 1.25])",
           "theory/li2024/criteria.py", "MOVE_DECAY = 0.5\n", "MOVE_DECAY = 1.1\n"),
    Mutant("finite-convergence-accept-unconfirmed", "W^svm = 0: the moves' accept taken at once, not confirmed a decade later",
           "theory/li2024/criteria.py", "confirmed = moved <= floor or (", "confirmed = True or ("),
    Mutant("theorem2-fin-decay-past-plateau", "Theorem 2's finite part accepted at x1.0 per doubling (reject >= x0.9)",
           "theory/li2024/regpath_verdict.py", "FIN_DECAY = 0.5  #", "FIN_DECAY = 1.0  #"),
    Mutant("automaton-decay-past-stall", "automaton errors accepted at x1.0 per decade (reject >= x0.9)",
           "theory/li2024/automaton.py", "LEAK_MAX, SPLIT_MAX, DECAY, FLOOR, STALL = 1e-2, 1e-2, 0.5, 1e-8, 0.9",
           "LEAK_MAX, SPLIT_MAX, DECAY, FLOOR, STALL = 1e-2, 1e-2, 1.0, 1e-8, 0.9"),
    Mutant("snap-exponent-past-reject", "Theorem 4's late exponent accepted up to 2.2 (reject >= 1.8)",
           "theory/tian2023/verdicts.py", "LATE_EXPONENT = (0.7, 1.6)", "LATE_EXPONENT = (0.7, 2.2)"),
    Mutant("combine-any", "a verdict holds when any statistic accepts", "theory/core/decision.py",
           "    if all(s.zone == ACCEPT for s in statistics):", "    if any(s.zone == ACCEPT for s in statistics):"),
    Mutant("real-text-combine-any", "a real-text figure holds when any part holds", "theory/tian2023/real_text.py",
           "return HOLDS if all(v == HOLDS for v in verdicts) else UNDECIDED",
           "return HOLDS if any(v == HOLDS for v in verdicts) else UNDECIDED"),
    Mutant("strategy-loss-ignored", "drawn_problems ignores loss (always log)", "strategies/problems.py",
           'problem = Problem.create(E, seqs, labels, draw(loss, label="loss"), head)',
           'problem = Problem.create(E, seqs, labels, draw(st.just("log"), label="loss"), head)'),
    Mutant("strategy-K-ignored", "priority_structures ignores K", "strategies/problems.py",
           'K = max(draw(K, label="K"), 3 if shape == "cyclic" else 2)',
           'K = max(draw(st.integers(2, 12), label="K"), 3 if shape == "cyclic" else 2)'),
    Mutant("strategy-d-ignored", "embeddings ignores d", "strategies/problems.py",
           'd = draw(d if d is not None else st.integers(K, K + 3), label="d")',
           'd = draw(st.integers(K, K + 3), label="d")'),
    Mutant("strategy-d_extra-ignored", "drawn_problems ignores d_extra", "strategies/problems.py",
           "plan = draw(embedding_plans(d_extra=d_extra, kinds=embedding_kinds",
           "plan = draw(embedding_plans(d_extra=st.integers(0, 3), kinds=embedding_kinds"),
    Mutant("strategy-classes-ignored", "sequence_classes ignores classes", "strategies/scansnap.py",
           'K = draw(classes, label="classes")', 'K = draw(st.integers(2, 3), label="classes")'),
    # Issue 37: the trend read at every continuation budget, and the compiled right-hand side's label entry
    # in the cancelling form 1 - a_y (the numpy reference keeps -Σ_{j≠y} a_j).
    Mutant("theorem1-trend-every-budget", "Theorem 1's trend decides at every continuation budget",
           "theory/li2024/criteria.py", "theorem1_statistics(run, analysis, earlier, trend_decides=last)",
           "theorem1_statistics(run, analysis, earlier, trend_decides=True)"),
    Mutant("flow-kernel-label-cancels", "the continuation's compiled gradient writes a_y - 1 as it cancels",
           "theory/li2024/flow_kernel.py", "G[lab, c] -= w * other", "G[lab, c] -= w * (1.0 - a[lab])"),
    Mutant("curvature-second-term-dropped", "the loss's Hessian in the scores forgets the softmax's own curvature",
           "theory/li2024/curvature.py", "    return J @ F @ J + second", "    return J @ F @ J"),
    Mutant("section5-bound-without-curvature", "the non-convex continuation's bound drops Grönwall's factor",
           "theory/li2024/continuation.py", "        return max(0.0, -self.space.least_eigenvalue(Hq))",
           "        return 0.0"),
    Mutant("curvature-kernel-mu-dropped", "the compiled non-convex right-hand side drops Grönwall's factor",
           "theory/li2024/curvature_kernel.py",
           "    out[n] = t * (eta * hg + _least_curvature(Hq, TZ, K, nq) * y[n])", "    out[n] = t * eta * hg"),
    Mutant("curvature-kernel-definite-shortcut", "the compiled μ takes every Hessian on W's movements for positive definite",
           "theory/li2024/curvature_kernel.py", "    if _positive_definite(S, R):", "    if R > 0:"),
    Mutant("curvature-kernel-jacobian-row", "the compiled Jacobian takes every query column's block from the first",
           "theory/li2024/curvature_kernel.py", "        _query_block_into(Hq, T, c, nq, HT)",
           "        _query_block_into(Hq, T, 0, nq, HT)"),
    Mutant("section5-robust-ignores-bound", "Section 5's continued budgets are judged at the nominal state only",
           "theory/li2024/local_continuation.py", "                             for d in (deviation_from_exact(end), deviation_from_exact(mid), deviation_from_exact(early)))",
           "                             for d in (0.0, 0.0, 0.0))"),
    # Issue 37, Section 5's residual draws: the bound over the accepted states, the trend's settled stretch and
    # the re-run from GD where the bound was too wide within its reach.
    Mutant("bound-nodes-half-weight", "the bound over the accepted states weighs each step by h/4",
           "theory/li2024/continuation.py", "D[j] = D[j - 1] * g + 0.5 * h * (be[i] * g + be[k])",
           "D[j] = D[j - 1] * g + 0.25 * h * (be[i] * g + be[k])"),
    Mutant("bound-nodes-no-error-estimate", "the bound over the accepted states drops its own error estimate",
           "theory/li2024/continuation.py", "np.maximum(fine, rough) + np.abs(fine - rough)", "fine"),
    Mutant("section5-trend-from-first", "a failed Section 5 verdict's trend is read from its first settled budget, "
           "not over the last decade", "theory/li2024/local_convergence.py",
           "    top, prior = ladder[-1], (ladder[-2] if len(ladder) > 1 else None)",
           "    top, prior = ladder[-1], next((b for b in ladder if b in settled_rates and b < ladder[-1]), None)"),
    Mutant("section5-no-rerun-from-gd", "Section 5 never re-runs GD where the bound was too wide within its reach",
           "theory/li2024/local_convergence.py", "    if state in BOUND_LIMITED and limited and variant != lcont.FIRST_ORDER:",
           "    if False:"),
    Mutant("path-bound-full-curvature", "the path bound grows at Grönwall's full rate, not on the velocity's normal space",
           "theory/li2024/shadowing.py", "    return (t * normal_curvature(S, v), float(np.linalg.norm(v))",
           "    return (alpha, float(np.linalg.norm(v))"),
    Mutant("path-bound-no-forcing",
           "the path bound leaves out GD's local error (in D⊥, the shift, the restart and the escape's march)",
           "theory/li2024/shadowing.py",
           "    return (t * normal_curvature(S, v), float(np.linalg.norm(v)), float(np.linalg.norm(S @ v)), beta, alpha,",
           "    return (t * normal_curvature(S, v), float(np.linalg.norm(v)), float(np.linalg.norm(S @ v)), 0.0, alpha,"),
    Mutant("escape-march-no-shift", "the escape's march bounds GD's distance by D alone, without the time shift's Σ V",
           "theory/li2024/escape.py",
           "        return shifted_bound(tr.pair.D, tr.pair.sigma, self.ts, self.rates[1], t)",
           "        return tr.pair.D"),
    Mutant("escape-march-shift-not-forcing", "the escape's march leaves out the shift's part across u as a forcing of D",
           "theory/li2024/escape.py", "        growth, forcing = mu2, beta + across * R", "        growth, forcing = mu2, beta"),
    Mutant("path-bound-not-tried", "Section 5 never judges the ladder again with the path bound",
           "theory/li2024/local_convergence.py",
           "    out = _through_continuation(p, theory_problem, r, select, reject, note, ladder, anchored, lcont.PATH_BOUND)",
           "    out = None"),
    Mutant("extended-precision-not-tried", "Section 5 never judges the ladder again in extended precision",
           "theory/li2024/local_convergence.py", "    if EXTENDED_EPS is not None:", "    if False:"),
    Mutant("extended-rhs-in-float64", "the extended right-hand side computes in float64 while claiming the wider floor",
           "theory/li2024/continuation.py", "        ld = np.longdouble\n        A = self.A1.astype(ld)",
           "        ld = np.float64\n        A = self.A1.astype(ld)"),
    Mutant("extended-data-in-float64", "the extended right-hand side keeps the data (weights, counts, head) in float64",
           "theory/li2024/continuation.py", "        _, G = loss_and_grad_scores(A, self.data_extended)",
           "        _, G = loss_and_grad_scores(A, self.data)"),
    Mutant("agreement-checks-another-variant", "the agreement check solves the plain first order whatever the run's "
           "bound and arithmetic", "theory/li2024/local_continuation.py",
           "    cont = continue_flow(problem, start, tau1, checkpoints=steps, estimate_error=True, **variant.options())",
           "    cont = continue_flow(problem, start, tau1, checkpoints=steps, estimate_error=True, order=variant.order)"),
    Mutant("section5-converging-not-extended", "a direction converging at the ladder's top is not judged a decade later",
           "theory/li2024/local_convergence.py", "        if gamma <= criteria.TREND_HOLD and own <= criteria.TREND_HOLD:",
           "        if False:"),
    Mutant("partial-discards", "a solve that fails in a later decade keeps nothing (partial ignored)",
           "theory/li2024/continuation.py", "            if not partial:\n                raise FloatingPointError(stopped)",
           "            if True:\n                raise FloatingPointError(stopped)"),
    Mutant("section5-resolves-past-a-stop", "Section 5 solves again past a continuation that stopped",
           "theory/li2024/local_convergence.py", "        if run.final.step < b and run.stopped is None:",
           "        if run.final.step < b:"),
    Mutant("noise-floor-assumed", "B's tolerance ignores the rounding noise measured on the problem",
           "theory/li2024/continuation.py", "    return max(atol, eps * t, measured)", "    return max(atol, eps * t)"),
    Mutant("kkt-residual-unchecked", "the stationarity residual keeps the first solver's answer",
           "theory/li2024/factorized_claims.py", "        if np.isfinite(out) and out <= 1.0 + 1e-9:",
           "        if True:"),
    Mutant("section5-trend-ignores-gamma", "Section 5's last budget accepts any rate under the cap, whatever its trend",
           "theory/li2024/local_convergence.py", "    return criteria.direction_zone(later[1], gamma, log_time=L) == ACCEPT, gamma",
           "    return later[1] <= criteria.DIRECTION_RATE_ESCALATED, gamma"),
    Mutant("section5-raw-correlation-at-horizon", "Section 5's last budget keeps judging the raw correlation",
           "theory/li2024/local_convergence.py",
           "            if state != \"aligned\" and b == ladder[-1] and prior in settled_rates:",
           "            if False:"),
    Mutant("section5-horizon-never-rejects", "Section 5's early accept stands whatever the horizon shows",
           "theory/li2024/local_convergence.py", "            if rejected is None:\n                return kept()",
           "            if True:\n                return kept()"),
    Mutant("section5-reject-without-trend", "Section 5's last budget rejects any rate above the line, whatever its trend",
           "theory/li2024/local_convergence.py", "    return criteria.direction_zone(later[1], gamma, log_time=L) == REJECT, gamma",
           "    return later[1] > criteria.DIRECTION_RATE, gamma"),
    Mutant("modified-flow-sign", "GD's modified equation takes its correction with the wrong sign",
           "theory/li2024/modified_flow.py",
           "    return G[:, flow.Q] + correction * flow.eta * dG[:, flow.Q], G, dG, Hq",
           "    return G[:, flow.Q] - correction * flow.eta * dG[:, flow.Q], G, dG, Hq"),
    Mutant("modified-flow-no-derivative", "the second-order bound leaves out the change of H g along the flow",
           "theory/li2024/modified_flow.py", "    return dHg, H2g", "    return 0.0, H2g"),
    Mutant("section5-no-extension", "a selection that changed in the ladder's last decade is not judged a decade later",
           "theory/li2024/local_convergence.py", "    if top * 10 <= _extension_max(variant, _horizon(r)):", "    if False:"),
    Mutant("noise-one-sample", "the right-hand side's rounding noise is one state's reading a decade, not the largest of 8",
           "theory/li2024/continuation.py", "NOISE_SAMPLES = 8", "NOISE_SAMPLES = 1"),
    Mutant("middle-zone-not-extended", "a trend between the lines at the ladder's top is left undecided there, not "
           "judged on the ladder extended", "theory/li2024/local_convergence.py",
           "        if criteria.TREND_HOLD < own < criteria.TREND_FAIL:", "        if False:"),
    Mutant("pseudo-svm-cache-ignores-selection", "the pseudo-TPG's Graph-SVM is cached per problem, not per selection",
           "theory/li2024/pseudo.py", "    key = (E.shape, E.tobytes(), tuple(map(tuple, problem.sequences)), sel)",
           "    key = (E.shape, E.tobytes(), tuple(map(tuple, problem.sequences)))"),
    Mutant("extension-not-longer-in-extended-precision", "the ladder stops at 2e14 in extended precision too, where "
           "B's rounding floor allows three decades more", "theory/li2024/local_convergence.py",
           "    if not variant.extended or EXTENDED_EPS is None:", "    if True:"),
    Mutant("bound-in-linear-form", "a non-convex flow's bound is solved in D, not ln D (an implicit step damps its growth)",
           "theory/li2024/continuation.py", "    system = None if flow.convex else _LogBound(flow)", "    system = None"),
    Mutant("no-rounding-forcing", "the right-hand side's own rounding does not force a non-convex flow's bound",
           "theory/li2024/continuation.py", "        return self.to_W * self.noise_at_s0 * math.exp(s - self.noise_s0)",
           "        return 0.0"),
    Mutant("no-edge-on-gd-ignored", "a ladder the bound leaves undecided past GD's own reading without a ⇒ edge is undecided",
           "theory/li2024/local_convergence.py", "                if own[\"not_judged\"] == NO_EDGE:", "                if False:"),
    Mutant("finite-rejected-before-relaxation", "Theorem 1's finite part is rejected within its relaxation time on S_fin",
           "theory/li2024/criteria.py", "    if z == REJECT and end.step < relax:", "    if False:"),
    Mutant("theorem1-fails-unconfirmed", "tpg check reports Theorem 1 failing without the independent computation",
           "theory/li2024/claims.py", "    if v.outcome is not Outcome.FAILS:\n        return v", "    if True:\n        return v"),
    Mutant("automaton-fails-unconfirmed", "tpg check reports the automaton failing without the independent computation",
           "theory/li2024/claims.py",
           "    if v.outcome is Outcome.FAILS:  # only where the independent computation reads the same (oracles/theorem1.py)",
           "    if False:"),
    Mutant("theorem2-fails-unconfirmed", "tpg check reports Theorem 2 failing without the independent computation",
           "theory/li2024/claims.py", "    if outcome is Outcome.FAILS and convex_case(problem):", "    if False:"),
    Mutant("theorem1-oracle-always-confirms", "the independent reading of Theorem 1 confirms every rejection it is asked about",
           "oracles/theorem1.py", "        confirmed |= both", "        confirmed = True"),
    Mutant("theorem1-oracle-never-confirms", "the independent reading of Theorem 1 confirms no rejection",
           "oracles/theorem1.py", "        confirmed |= both", "        confirmed = False"),
    Mutant("second-order-never-tried", "a draw the first-order bound leaves undecided is not continued to second order",
           "theory/li2024/local_convergence.py", "        if state in BOUND_LIMITED and variant == lcont.FIRST_ORDER:",
           "        if False:"),
]


def check_mutants(mutants) -> list[str]:
    """Every mutant must apply exactly once to the current tree."""
    problems = []
    for m in mutants:
        text = (REPO / m.path).read_text()
        n = text.count(m.old)
        if n != 1:
            problems.append(f"{m.name}: {m.path} holds the original text {n} times (needs exactly 1)")
    return problems


def run_mutant(m: Mutant, profile: str, workers: int, timeout: float, maxfail: int, paths=()) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"mutant-{m.name}-"))
    tree = tmp / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(tree), "HEAD"], check=True)
    try:
        target = tree / m.path
        target.write_text(target.read_text().replace(m.old, m.new, 1))
        # Options joined with "=": a bare path argument would make xdist's workers pick the report folder's
        # parent as rootdir, where no conftest registers the report plugin's options.
        args = [sys.executable, "-m", "pytest", "-q", "-rf", f"--hypothesis-profile={profile}",
                f"--rootdir={tree}", f"--report-root={tmp / 'reports'}", "--report-keep=1", "--no-observations",
                "-p", "no:cacheprovider"]
        args += ["-n", str(workers)] if workers > 1 else ["-p", "no:xdist"]
        if maxfail:
            args.append(f"--maxfail={maxfail}")
        args += list(paths)  # relative to the worktree (cwd); none: the whole suite
        env = {**os.environ, "PYTHONPATH": str(tree)}
        t0 = time.time()
        try:
            done = subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
            out, rc = done.stdout, done.returncode
        except subprocess.TimeoutExpired as exc:
            out, rc = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or ""), -1
        seconds = time.time() - t0
        killers = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", out, re.M)))
        if rc not in (0, 1) and not killers:  # usage error, collection error, timeout: not a verdict
            raise RuntimeError(f"mutant {m.name}: pytest exited {rc} without failures:\n{out[-2000:]}")
        return {"name": m.name, "what": m.what, "killed": bool(killers), "killers": killers,
                "seconds": seconds, "rc": rc}
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def short(nodeid: str) -> str:
    return nodeid.split("::", 1)[-1].split(" - ")[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per mutant run")
    ap.add_argument("--only", nargs="*", default=None, help="mutant names to run (default: all)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--maxfail", type=int, default=0,
                    help="stop a mutant's run after this many failures (0: run everything); the table then "
                         "lists the first killers only")
    ap.add_argument("--paths", nargs="*", default=(),
                    help="pytest paths or node ids to run on each mutant (default: the whole suite); a mutant "
                         "killed here is killed by the suite, one that survives may still be killed elsewhere")
    a = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if a.only is None or m.name in a.only]
    unknown = set(a.only or ()) - {m.name for m in MUTANTS}
    if unknown:
        print(f"error: unknown mutant(s) {sorted(unknown)}; known: {[m.name for m in MUTANTS]}", file=sys.stderr)
        return 2
    problems = check_mutants(chosen)
    if problems:
        print("error: " + "; ".join(problems), file=sys.stderr)
        return 2
    rows = []
    for i, m in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {m.name}: {m.what} ...", file=sys.stderr, flush=True)
        r = run_mutant(m, a.profile, a.workers, a.timeout, a.maxfail, a.paths)
        print(f"    killed={r['killed']} by {len(r['killers'])} in {r['seconds']:.0f} s", file=sys.stderr, flush=True)
        rows.append(r)
    ok = sum(len(r["killers"]) >= KILL_MIN for r in rows)
    if a.markdown:
        print("| mutant | what | killed | by | properties (first 4) | seconds |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['name']} | {r['what']} | {'yes' if r['killed'] else '**no**'} | {len(r['killers'])} | "
                  f"{', '.join(short(k) for k in r['killers'][:4])} | {r['seconds']:.0f} |")
    else:
        for r in rows:
            print(f"{r['name']:<26} killed={'yes' if r['killed'] else 'NO ':<3} by {len(r['killers']):>3}  "
                  f"{r['seconds']:6.0f} s  {', '.join(short(k) for k in r['killers'][:4])}")
    print(f"\nmutation score: {sum(r['killed'] for r in rows)}/{len(rows)} killed; "
          f"{ok}/{len(rows)} killed by at least {KILL_MIN} properties")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
