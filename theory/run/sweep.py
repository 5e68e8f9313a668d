"""Sweeps and phase diagrams: ``python -m theory sweep NAME [--workers N | --scheduler ADDRESS] ...``.

A sweep is a grid of parameters times a number of seeds; every (parameters, seed) pair is one *run*, a pure
function of its inputs (:func:`run_one`), so the same seeds give the same records whether the runs go
in-process (default), on a Dask ``LocalCluster`` (``--workers N``, one thread per worker process) or on an
existing Dask cluster (``--scheduler ADDRESS``; its workers must have this package installed at the same
commit).

Records: one JSON line per run, ``{"sweep", "params", "seed", "verdict", "measures"}``, appended to
``--out`` by the client as runs finish (measures rounded to 10 significant digits, so the last bits of a
BLAS call never make two modes disagree).  ``--resume`` skips the runs already in the file; the client
writes each key once, so a worker lost mid-sweep (Dask reschedules its tasks) never duplicates a record.
Compiled kernels: a worker plugin loads them once per worker process (numba's on-disk cache), not per task.

Sweeps:

* ``theorem1-phase`` -- share of random valid problems (log loss, default head, labels in the samples,
  independent embeddings) whose Theorem 1 decision (:func:`theory.li2024.criteria.theorem1_decide`, the
  property's own, escalated x10 while undecided, through the log-time continuation where it agrees with GD:
  :class:`theory.li2024.continuation.Escalation`; each run's ``engines`` name the engine of every budget) holds,
  over step size
  (a multiple of the safe bound ``1/β``) x condition number of ``E`` (exact: ``E = U diag(s) V^T``) x ``K``.
  A problem depends on (seed, condition, K) only, so every step multiple sees the same problems.  Verdicts:
  ``pass`` (holds), ``fail`` (rejected at two budgets, or GD overflowed), ``undecided`` (between the zones at
  the maximum budget), ``not judged`` (``10^4 τ₀`` beyond ``MAX_STEPS``, as in the property).
* ``theorem2-phase``, ``automaton-phase`` -- the claims' own judges (:func:`theory.li2024.claims.judge_theorem2`,
  :func:`theory.li2024.claims.judge_automaton`) on random valid problems over condition number x ``K``:
  ``pass``, ``fail``, ``undecided``, ``not judged``.
* ``section5-phase`` -- alignment with the pseudo-TPG Graph-SVM (:mod:`theory.li2024.local_convergence`, the
  criterion of ``properties/li2024/test_section5.py``: settled selection, then correlation and Theorem 1's
  rate-aware direction test, a failure re-judged at 10x the budget) over loss x head (default
  biorthogonal head, tied ``C = E``, random).
* ``kq-phase`` -- where GD on ``(W_K, W_Q)`` heads (issue 38; :func:`kq_phase_run`) on random Gaussian
  problems whose nuclear-norm and Frobenius Graph-SVMs are >= 10° apart, over problem shape ``KxD`` x width
  ``m`` (``d/2``, ``d-1``: narrower than ``d``; ``d``, ``2d``): ``pass`` heading to ``W^nuc``, ``fail`` to
  ``W^svm``, ``undecided`` neither.
* ``li-cyclic``, ``li-acyclic``, ``li-local``, ``syn-small``, ``syn-medium`` -- the reproductions, one run per
  seed (one trial of the Li et al. experiments with that seed; one seed of the Scan and Snap ones).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from argparse import Namespace
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

SIG_DIGITS = 10


class SweepError(ValueError):
    """Bad sweep input (unknown name, bad parameter, unreachable scheduler): one line, exit status 2."""


# ------------------------------------------------------------------------------------------------
# Runs
# ------------------------------------------------------------------------------------------------
def conditioned_embeddings(rng, K: int, d: int, condition: float) -> np.ndarray:
    """K x d embeddings with condition number exactly ``condition``: ``U diag(s) V^T``, ``s`` log-spaced
    from 1 down to ``1/condition``."""
    U, _ = np.linalg.qr(rng.normal(size=(K, K)))
    V, _ = np.linalg.qr(rng.normal(size=(d, d)))
    s = np.geomspace(1.0, 1.0 / condition, K) if K > 1 else np.ones(1)
    return U @ np.diag(s) @ V[:K]


def valid_problem(rng, K: int, condition: float, n: int = 6, T: int = 4, loss: str = "log", head=None):
    """Random samples as the paper draws them (``T`` distinct tokens, label from the sample), rejected until
    some ``⇒`` edge exists (``W^svm != 0``)."""
    from theory.li2024.graphs import token_priority_graphs
    from theory.core.problem import Problem

    T = min(T, K)
    for _ in range(10_000):
        E = conditioned_embeddings(rng, K, K, condition)
        seqs = [list(rng.choice(K, size=T, replace=False)) for _ in range(n)]
        labels = [int(rng.choice(s)) for s in seqs]
        C = head(E, rng) if head is not None else None
        p = Problem.create(E, seqs, labels, loss, C)
        if any(g.dominates() for g in token_priority_graphs(p).values()):
            return p
    raise SweepError(f"no problem with a ⇒ edge after 10000 draws (K={K})")


def _cell_seed(seed: int, *parts) -> np.random.Generator:
    ints = [int(seed)] + [int(round(float(x) * 1000)) if not isinstance(x, str) else sum(map(ord, x)) for x in parts]
    return np.random.default_rng(ints)


def theorem1_run(params: dict, seed: int) -> tuple[str, dict]:
    from theory.li2024 import criteria
    from theory.li2024.analysis import analyze
    from theory.li2024.continuation import Escalation
    from theory.li2024.losses import safe_step
    from theory.li2024.training import train

    K, cond, mult = int(params["K"]), float(params["condition"]), float(params["step"])
    p = valid_problem(_cell_seed(seed, K, cond), K, cond)
    an = analyze(p)
    eta = mult * safe_step(p)
    tau0 = criteria.time_unit(an.svm.norm, eta)
    m = {"svm_norm": an.svm.norm, "eta": eta, "tau0": tau0, "n": p.n, "d": p.d}
    if 10**criteria.DECADES * tau0 > criteria.MAX_STEPS:
        m["reason"] = "10^4 time units exceed MAX_STEPS"
        return "not judged", m
    steps = criteria.budget(an.svm.norm, eta)
    try:
        with np.errstate(over="raise", invalid="raise"):
            traj = train(p, steps, eta, analysis=an)
            v, _ = criteria.theorem1_decide(traj, an, Escalation(p, an))
    except (FloatingPointError, OverflowError) as exc:
        m["reason"] = f"GD overflowed: {exc}"
        return "fail", m
    m.update(v.measures)
    m["budgets"] = [b for b, _ in v.history]
    m["engines"] = [t.get("engine", "gd") for t in v.trail]
    if v.failures:
        m["failures"] = v.failures
    return {"holds": "pass", "fails": "fail", "undecided": "undecided"}[v.outcome.value], m


def claim_run(judge_name: str):
    """A sweep run that judges one random valid problem (``K``, ``condition``) with a claim's own judge
    (:mod:`theory.li2024.claims`): the verdict the property, ``check`` and the report give."""
    def run(params: dict, seed: int) -> tuple[str, dict]:
        from theory.li2024 import claims

        K, cond = int(params["K"]), float(params["condition"])
        p = valid_problem(_cell_seed(seed, K, cond), K, cond)
        v = getattr(claims, judge_name)(p)
        m = {**v.measures, "reason": v.reason} if not v.passed else dict(v.measures)
        return {"holds": "pass", "fails": "fail", "undecided": "undecided",
                "not applicable": "not judged"}[v.outcome.value], m

    return run


def registered_claim_run(params: dict, seed: int) -> tuple[str, dict]:
    """The ``claims`` sweep: any registered claim (built in, or added by another package through the entry
    point ``attention_tpg_suite.claims``) judged by its own ``check`` on one random valid problem (``K``,
    ``condition``) with the first loss its stated domain pairs with a biorthogonal head (log when it states
    none)."""
    from theory.claims import claim

    c = claim(str(params["claim"]))
    # the problems here have the default (biorthogonal) head: the first loss the domain pairs with it
    loss = next((l for l, h in c.domain.pairs() if h == "biorthogonal"), "log")
    K, cond = int(params["K"]), float(params["condition"])
    p = valid_problem(_cell_seed(seed, K, cond, c.name), K, cond, loss=loss)
    v = c.check(p)
    m = {**v.measures, "reason": v.reason} if not v.passed else dict(v.measures)
    return {"holds": "pass", "fails": "fail", "undecided": "undecided", "not applicable": "not judged",
            "error": "error"}[v.outcome.value], m


def _judged_claims() -> list[str]:
    """Every registered claim that judges problem files (the ``claims`` sweep's default axis)."""
    from theory.claims import all_claims

    # Scan and Snap's claims judge a class layout of their own data model, never a problem file.
    return [c.name for c in all_claims() if c.judge is not None and not c.name.startswith("tian2023.")]


HEADS = {
    "biorthogonal": None,
    "tied": lambda E, rng: E,
    "random": lambda E, rng: rng.normal(size=E.shape),
}
def section5_run(params: dict, seed: int) -> tuple[str, dict]:
    """The Section 5 criterion (:mod:`theory.li2024.local_convergence`, the property's own, budget escalation
    included) on one random problem (n=6, T=4, K=6, d=6, Gaussian unit-norm embeddings) with this loss
    and head."""
    from theory.li2024 import local_convergence

    loss, head = str(params["loss"]), str(params["head"])
    if head not in HEADS:
        raise SweepError(f"section5-phase: head {head!r} not in {sorted(HEADS)}")
    rng = _cell_seed(seed, 6)
    p = valid_problem(rng, 6, 1.0, loss=loss, head=HEADS[head])
    try:
        step = local_convergence.section5_step(p)
    except ValueError as exc:  # e.g. the log loss infinite at W(0) = 0 under this head: GD cannot start
        return "not judged", {"reason": f"no safe step: {exc}"}
    try:
        with np.errstate(over="raise", invalid="raise"):
            traj, step = local_convergence.train_section5(p, local_convergence.STEPS, step)
    except (FloatingPointError, OverflowError) as exc:
        return "fail", {"eta": step.eta, "reason": f"GD overflowed: {exc}"}
    return section5_judge(p, traj, step)  # outside errstate, as the property judges it


SECTION5_VERDICTS = {"aligned": "pass", "not aligned": "fail", "not judged": "not judged"}


def section5_judge(p, traj, step) -> tuple[str, dict]:
    """Verdict and measures of one relaxed-head problem trained at ``step``
    (:func:`theory.li2024.local_convergence.section5_step`) under :func:`theory.li2024.local_convergence.verdict`."""
    from theory.li2024 import local_convergence

    outcome, why, r = local_convergence.verdict(p, p.replace(head=None, loss="log"), traj, step=step)
    m = {"eta": r["eta"], "steps": r["steps"], "step_proved": bool(r["step"].proved)}
    if "corr_pseudo" in r:
        ps, true = r["pseudo"], r["true"]
        m.update({k: r[k] for k in ("corr_pseudo", "inc_pseudo", "corr_true", "inc_true")})
        m.update({"pseudo_equals_true": bool(np.linalg.norm(ps.svm.W - true.W) <= 1e-6 * max(true.norm, 1e-300)),
                  "ambiguous": int(ps.ambiguous), "pseudo_svm_norm": ps.svm.norm})
        if r["settled"]:
            m["rate_pseudo"], m["rate_true"] = local_convergence.rates(r)
    if outcome != "aligned":
        m["reason"] = why
    return SECTION5_VERDICTS[outcome], m


def _flat(prefix: str, value, out: dict) -> None:
    """Numbers of a reproduction's result as flat measures (per-trial value lists and curves left out)."""
    if isinstance(value, dict) and "mean" in value and prefix:  # one trial's summary: its value
        out[prefix] = value["mean"]
    elif isinstance(value, dict):
        for k, v in value.items():
            if k in ("values", "curves", "_history", "runtime_s"):
                continue
            _flat(f"{prefix}.{k}" if prefix else k, v, out)
    elif isinstance(value, (bool, int, float, np.integer, np.floating)) and not isinstance(value, str):
        out[prefix] = value


def reproduction_run(name: str) -> Callable:
    def run(params: dict, seed: int) -> tuple[str, dict]:
        from theory.run.reproduce import run as reproduce

        if name.startswith("li-"):
            args = Namespace(trials=1, seed=seed, steps=None, loss=params.get("loss"), shape=None, figure=None)
        else:
            args = Namespace(seeds=1, seed=seed)
        res = reproduce(name, args)
        m: dict = {}
        if name == "syn-medium":
            for c in res["cells"]:
                m[f"entropy.q{c['queries']}.eta_z{c['eta_z']:g}.ratio{c['ratio']:g}"] = c["mean"]
        elif name == "syn-small":
            for r in res["runs"]:
                for c in r["classes"]:
                    tag = f"eta_y{r['eta_y']:g}.eta_z{r['eta_z']:g}.class{c['class']}"
                    m[f"{tag}.common_mass"] = c["common_mass"]
                    m[f"{tag}.distinct_entropy"] = c["distinct_entropy"]
        else:
            _flat("", {k: v for k, v in res.items() if k not in ("experiment", "setting")}, m)
        return "measured", m
    return run


# ------------------------------------------------------------------------------------------------
# The registry
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sweep:
    name: str
    run: Callable
    grid: dict = field(default_factory=dict)  # param -> default values (ordered)
    seeds: int = 3
    axes: tuple = ()  # (x, y) params of the phase diagram; the rest are facets
    headline: tuple = ()  # measures drawn first in a reproduction's figure


KQ_WIDTHS = {"d/2": lambda d: max(1, d // 2), "d-1": lambda d: max(1, d - 1), "d": lambda d: d, "2d": lambda d: 2 * d}
KQ_MIN_ANGLE = 10.0  # degrees between W^nuc and W^svm: below it the two headings cannot be told apart


def kq_phase_problem(seed: int, K: int, d: int):
    """The problem of the kq-phase cell ``KxD`` of ``seed``: the first of 30 Gaussian draws from the cell's seed
    (:func:`theory.li2024.factorized_claims.gaussian_problem`) whose two Graph-SVMs are at least
    :data:`KQ_MIN_ANGLE` apart, as ``(problem, W^nuc, W^svm, angle in degrees)``; None when no draw is."""
    from theory.li2024.factorized_claims import gaussian_problem
    from theory.li2024.nuclear import angle_degrees, nuclear_svm
    from theory.li2024.svm import graph_svm

    rng = _cell_seed(seed, K, d)
    for _ in range(30):
        p = gaussian_problem(rng, K, d)
        fro = graph_svm(p, exact=False)
        if fro.norm == 0:
            continue
        nuc = nuclear_svm(p)
        angle = angle_degrees(nuc.W, fro.W)
        if angle >= KQ_MIN_ANGLE:
            return p, nuc.W, fro.W, angle
    return None


def kq_phase_run(params: dict, seed: int) -> tuple[str, dict]:
    """Where GD on ``(W_K, W_Q)`` heads (:func:`theory.li2024.factorized_claims.destination`) on a random
    Gaussian problem of shape ``KxD`` whose two Graph-SVMs are >= 10° apart (the first of 30 draws from the
    cell's seed; the same problem for every width), width ``m`` in :data:`KQ_WIDTHS`, ``steps`` steps from
    the seeded small start: ``pass`` heading to ``W^nuc``, ``fail`` to ``W^svm``, ``undecided`` neither,
    ``not judged`` when no draw is 10° apart."""
    from theory.li2024.analysis import analyze
    from theory.li2024.factorized import train_factorized
    from theory.li2024.factorized_claims import destination

    shape, width, steps = str(params["shape"]), str(params["m"]), int(params["steps"])
    try:
        K, d = (int(x) for x in shape.split("x"))
    except ValueError:
        raise SweepError(f"kq-phase: shape {shape!r} is not KxD") from None
    if width not in KQ_WIDTHS or d < K or steps < 10_000:
        raise SweepError(f"kq-phase: need m in {sorted(KQ_WIDTHS)}, d >= K and steps >= 10000 (two decade increments); got {params}")
    drawn = kq_phase_problem(seed, K, d)
    if drawn is None:
        return "not judged", {"reason": f"no draw with the two SVMs >= {KQ_MIN_ANGLE}° apart"}
    p, nuc, fro, angle = drawn
    m = KQ_WIDTHS[width](d)
    marks = [10 ** k for k in range(2, int(math.log10(steps)) + 1)]
    run = train_factorized(p, marks[-1], m, seed=seed, checkpoints=marks)
    heading, measures = destination(run.checkpoints, p, analyze(p), nuc, fro)
    measures.update(angle=angle, width=m, rank_nuc=int(np.linalg.matrix_rank(nuc, 1e-6 * np.linalg.norm(nuc, 2))))
    return {"nuclear": "pass", "frobenius": "fail", "neither": "undecided"}[heading], measures


_LI_GLOBAL = ("correlation", "finite_error", "top_scc_mass")
SWEEPS = {
    # Default grid: 7 x 5 x 2 = 70 cells x 5 seeds = 350 runs (timings in the README).
    "theorem1-phase": Sweep("theorem1-phase", theorem1_run,
                            {"step": [0.25, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0], "condition": [1.0, 3.0, 10.0, 30.0, 100.0],
                             "K": [3, 5]},
                            seeds=5, axes=("step", "condition")),
    # The claims' own judges on random valid problems: K x condition number of E.
    "theorem2-phase": Sweep("theorem2-phase", claim_run("judge_theorem2"),
                            {"condition": [1.0, 10.0, 100.0], "K": [3, 5]}, seeds=5, axes=("condition", "K")),
    "automaton-phase": Sweep("automaton-phase", claim_run("judge_automaton"),
                             {"condition": [1.0, 10.0, 100.0], "K": [3, 5]}, seeds=5, axes=("condition", "K")),
    "section5-phase": Sweep("section5-phase", section5_run,
                            {"loss": ["log", "ce", "lsq", "square"], "head": ["biorthogonal", "tied", "random"]},
                            seeds=3, axes=("head", "loss")),
    # Every registered claim, other packages' included (their grid axis is read from the registry when the
    # sweep runs): K x condition number of E.
    "claims": Sweep("claims", registered_claim_run, {"claim": _judged_claims, "condition": [1.0, 10.0], "K": [3]},
                    seeds=2, axes=("claim", "condition")),
    # Issue 38: where GD on (W_K, W_Q) heads (pass: W^nuc, fail: W^svm, undecided: neither), shape x width.
    "kq-phase": Sweep("kq-phase", kq_phase_run, {"m": list(KQ_WIDTHS), "shape": ["4x4", "4x6", "6x6"],
                                                 "steps": [100_000]}, seeds=3, axes=("m", "shape")),
    "li-cyclic": Sweep("li-cyclic", reproduction_run("li-cyclic"), seeds=10, headline=_LI_GLOBAL),
    "li-acyclic": Sweep("li-acyclic", reproduction_run("li-acyclic"), seeds=10, headline=_LI_GLOBAL),
    "li-local": Sweep("li-local", reproduction_run("li-local"), {"loss": ["ce"]}, seeds=10, axes=("loss",),
                      headline=("correlation_true_tpg", "correlation_pseudo_tpg", "pseudo_equals_true",
                                "norm_difference_paper_pseudo_tpg", "norm_difference_certified_pseudo_tpg")),
    "syn-small": Sweep("syn-small", reproduction_run("syn-small"), seeds=3),
    "syn-medium": Sweep("syn-medium", reproduction_run("syn-medium"), seeds=3),
}


def _parse_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def grid_of(name: str, overrides: list[str] | None = None) -> dict:
    """The sweep's grid with ``--param NAME=V1,V2`` overrides (a parameter of the sweep only)."""
    sw = SWEEPS[name]
    grid = {k: list(v() if callable(v) else v) for k, v in sw.grid.items()}
    for item in overrides or []:
        key, sep, values = item.partition("=")
        if not sep or not values:
            raise SweepError(f"--param: expected NAME=V1,V2,..., got {item!r}")
        if key not in grid:
            raise SweepError(f"--param: {name} has no parameter {key!r} (it has: {', '.join(grid) or 'none'})")
        vals = [_parse_value(v) for v in values.split(",")]
        kind = type(grid[key][0]) if grid[key] else None
        if kind is float:  # "1" means 1.0 on a float axis: the same record key as the default grid's
            vals = [float(v) if isinstance(v, int) else v for v in vals]
        grid[key] = vals
    return grid


def tasks(name: str, seeds: int, overrides=None) -> list[tuple[dict, int]]:
    import itertools

    grid = grid_of(name, overrides)
    keys = list(grid)
    cells = [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))] or [{}]
    return [(cell, s) for cell in cells for s in range(seeds)]


def record_key(name: str, params: dict, seed: int) -> str:
    return json.dumps({"sweep": name, "params": params, "seed": seed}, sort_keys=True)


def _rounded(x):
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return float(f"{x:.{SIG_DIGITS}g}") if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_rounded(v) for v in x]
    return str(x)


def run_one(name: str, params: dict, seed: int) -> dict:
    """One run as its record (deterministic: a function of ``name``, ``params`` and ``seed`` only)."""
    from theory.li2024.svm import SolverError

    try:
        verdict, measures = SWEEPS[name].run(params, seed)
    except SolverError as exc:
        verdict, measures = "error", {"reason": f"certificate failed: {exc}"}
    return {"sweep": name, "params": params, "seed": seed, "verdict": verdict, "measures": _rounded(measures)}


# ------------------------------------------------------------------------------------------------
# Execution
# ------------------------------------------------------------------------------------------------
WARM_UPS = {"count": 0}


def warm_up_kernels() -> int:
    """Import what every run needs and load the compiled GD kernels in this process (once; numba's on-disk
    cache): the worker plugin calls it at worker start, so no task pays for it.  Returns how often this
    process did it (1 after any number of tasks)."""
    if WARM_UPS["count"] == 0:
        import theory.li2024.analysis  # noqa: F401  (scipy, Clarabel: every run needs them; imported once here)
        import theory.li2024.pseudo  # noqa: F401
        import theory.li2024.training  # noqa: F401
        try:
            from theory.li2024.engine import warm_up
        except ImportError:  # numba missing: the numpy engine needs nothing
            pass
        else:
            warm_up()
        WARM_UPS["count"] += 1
    return WARM_UPS["count"]


def _worker_plugin():
    from distributed.diagnostics.plugin import WorkerPlugin

    class LoadKernels(WorkerPlugin):
        name = "attention-suite-kernels"

        def setup(self, worker):
            warm_up_kernels()

    return LoadKernels()


def read_records(path: Path) -> list[dict]:
    """Every complete record of a sweep file (a torn last line, from a killed client, is ignored)."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _drop_torn_tail(path: Path) -> None:
    """Cut an unfinished last line (a client killed while writing), so appended records start on a line."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


def _reachable(address: str) -> None:
    """Fail fast (one line) when a ``tcp://host:port`` scheduler does not accept connections."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "tls"):
        return  # other transports (inproc, ucx, ws): let Dask judge them
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise SweepError(f"--scheduler {address}: bad address ({exc})") from None
    if not host or not port:
        raise SweepError(f"--scheduler {address}: expected tcp://HOST:PORT")
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        raise SweepError(f"--scheduler {address}: cannot connect ({exc.strerror or exc})") from None


def _connect(workers: int | None, scheduler: str | None):
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise SweepError(f"--workers/--scheduler need dask.distributed ({exc})") from None
    if scheduler:
        _reachable(scheduler)
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise SweepError(f"--scheduler {scheduler}: cannot connect ({type(exc).__name__}: {exc})") from None
        return client, None
    if workers < 1:
        raise SweepError(f"--workers: expected a positive integer, got {workers}")
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=50)
    return Client(cluster), cluster


def execute(name: str, *, seeds: int | None = None, out: str | Path, resume: bool = False, workers: int | None = None,
            scheduler: str | None = None, overrides=None, progress: bool = True) -> dict:
    """Run (or continue) a sweep; returns a summary (counts per verdict, runs done now and before, seconds)."""
    if name not in SWEEPS:
        raise SweepError(f"unknown sweep {name!r}; expected one of {', '.join(sorted(SWEEPS))}")
    if workers is not None and scheduler:
        raise SweepError("--workers and --scheduler exclude each other")
    seeds = SWEEPS[name].seeds if seeds is None else seeds
    if seeds < 1:
        raise SweepError(f"--seeds: expected a positive integer, got {seeds}")
    out = Path(out)
    todo_all = tasks(name, seeds, overrides)
    done: set[str] = set()
    if out.exists() and out.stat().st_size > 0:
        if not resume:
            raise SweepError(f"--out {out}: file exists; --resume continues it (or choose another file)")
        _drop_torn_tail(out)
        done = {record_key(r["sweep"], r["params"], r["seed"]) for r in read_records(out) if r.get("sweep") == name}
    todo = [(p, s) for p, s in todo_all if record_key(name, p, s) not in done]
    out.parent.mkdir(parents=True, exist_ok=True)
    from tqdm import tqdm

    bar = tqdm(total=len(todo), desc=name, unit="run", file=sys.stderr, disable=not progress, mininterval=0.5)
    t0 = time.perf_counter()
    written = 0
    setup = 0.0
    with open(out, "a") as fh:
        def write(rec):
            nonlocal written
            key = record_key(rec["sweep"], rec["params"], rec["seed"])
            if key in done:  # a rerun of a lost worker's task: keep the first
                return
            done.add(key)
            fh.write(json.dumps(rec, sort_keys=True, allow_nan=False) + "\n")
            fh.flush()
            written += 1
            bar.update(1)
            bar.set_postfix_str(rec["verdict"], refresh=False)

        if workers is None and not scheduler:
            t_setup = time.perf_counter()
            warm_up_kernels()
            setup = time.perf_counter() - t_setup
            for p, s in todo:
                write(run_one(name, p, s))
        elif todo:
            setup = _distributed(name, todo, write, workers, scheduler)
    bar.close()
    recs = [r for r in read_records(out) if r.get("sweep") == name]
    counts: dict = {}
    for r in recs:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    secs = time.perf_counter() - t0
    return {"sweep": name, "out": str(out), "runs": len(todo_all), "ran_now": written,
            "skipped_finished": len(todo_all) - len(todo), "verdicts": counts, "seconds": round(secs, 2),
            "runs_per_second": round(written / secs, 3) if secs > 0 and written else None,
            "setup_seconds": round(setup, 2),  # start the cluster / join it, load the kernels in every worker
            "runs_per_second_after_setup": round(written / (secs - setup), 3) if secs > setup and written else None,
            "mode": f"scheduler {scheduler}" if scheduler else f"LocalCluster({workers})" if workers else "in-process"}


MAX_RESUBMITS = 3


def _distributed(name, todo, write, workers, scheduler) -> None:
    """Submit every run; write each result as it finishes.  A task lost with its worker is rescheduled by
    Dask itself; one that errors at the infrastructure level (e.g. ``KilledWorker``) is resubmitted up to
    ``MAX_RESUBMITS`` times.  Exceptions inside a run are part of its record (:func:`run_one`)."""
    from distributed import as_completed

    t0 = time.perf_counter()
    client, cluster = _connect(workers, scheduler)
    try:
        client.register_plugin(_worker_plugin())  # returns once every current worker has loaded the kernels
        setup = time.perf_counter() - t0
        meta, futures = {}, []
        for p, s in todo:
            f = client.submit(run_one, name, p, s, pure=False)
            meta[f.key] = (p, s, 0)
            futures.append(f)
        ac = as_completed(futures, with_results=False)
        del futures
        for f in ac:
            p, s, tries = meta.pop(f.key)
            if f.status == "finished":
                write(f.result())
                continue
            exc = f.exception()
            if tries >= MAX_RESUBMITS:
                raise SweepError(f"run {p} seed {s} failed {tries + 1} times ({type(exc).__name__}: {exc}); "
                                 f"--resume continues the sweep") from None
            g = client.submit(run_one, name, p, s, pure=False)
            meta[g.key] = (p, s, tries + 1)
            ac.add(g)
        return setup
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# ------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------
def cell_counts(records: list[dict], axes: tuple) -> dict:
    """``{(facet, x, y): Counter of verdicts}`` with ``facet`` the other parameters (sorted ``k=v`` text)."""
    out: dict = {}
    for r in records:
        p = r["params"]
        x = p.get(axes[0]) if axes else None
        y = p.get(axes[1]) if len(axes) > 1 else None
        facet = ", ".join(f"{k}={v}" for k, v in sorted(p.items()) if k not in axes[:2])
        c = out.setdefault((facet, x, y), {})
        c[r["verdict"]] = c.get(r["verdict"], 0) + 1
    return out


def _sorted_values(values):
    return sorted(set(values), key=lambda v: (isinstance(v, str), v))


def figure(records: list[dict], name: str | None = None) -> bytes:
    """The sweep's figure as PNG bytes: for sweeps with pass/fail verdicts, a phase diagram per facet
    (heatmap of the pass share among judged runs, annotated ``passed/judged`` and the run count); for
    the reproductions, each headline measure against the seed."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not records:
        raise SweepError("no records to draw")
    name = name or records[0]["sweep"]
    sw = SWEEPS.get(name)
    judged_kind = any(r["verdict"] in ("pass", "fail") for r in records)
    if judged_kind:
        axes = tuple(sw.axes) if sw and sw.axes else tuple(sorted(records[0]["params"]))[:2]
        counts = cell_counts(records, axes)
        facets = _sorted_values(k[0] for k in counts)
        xs = _sorted_values(k[1] for k in counts)
        ys = _sorted_values(k[2] for k in counts)
        fig, axs = plt.subplots(1, len(facets), figsize=(1.1 * len(xs) * len(facets) + 1.5, 0.75 * len(ys) + 1.6),
                                squeeze=False)
        cmap = plt.get_cmap("RdYlGn").with_extremes(bad="#dddddd")
        for ax, facet in zip(axs[0], facets):
            share = np.full((len(ys), len(xs)), np.nan)
            for i, y in enumerate(ys):
                for j, x in enumerate(xs):
                    c = counts.get((facet, x, y), {})
                    n, ok = sum(c.values()), c.get("pass", 0)
                    judged = ok + c.get("fail", 0)
                    if judged:
                        share[i, j] = ok / judged
                    if n:
                        ax.text(j, i, f"{ok}/{judged}\nn={n}", ha="center", va="center", fontsize=7)
            im = ax.imshow(np.ma.masked_invalid(share), cmap=cmap, vmin=0, vmax=1, origin="lower", aspect="auto")
            ax.set_xticks(range(len(xs)), [f"{x:g}" if isinstance(x, float) else str(x) for x in xs], fontsize=8)
            ax.set_yticks(range(len(ys)), [f"{y:g}" if isinstance(y, float) else str(y) for y in ys], fontsize=8)
            ax.set_xlabel(axes[0] if axes else "")
            ax.set_ylabel(axes[1] if len(axes) > 1 else "")
            ax.set_title(facet or name, fontsize=9)
        fig.colorbar(im, ax=list(axs[0]), label="pass share (passed / judged; grey: none judged)", shrink=0.9)
        fig.suptitle(f"{name}: {len(records)} runs", fontsize=10)
    else:
        def numeric(k):
            vals = [r["measures"].get(k) for r in records]
            return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals if v is not None)

        keys = [k for k in (sw.headline if sw else ()) if k in records[0]["measures"]]
        keys += [k for k in records[0]["measures"] if k not in keys and numeric(k)
                 and len({r["measures"].get(k) for r in records}) > 1]
        keys = keys[:6]
        fig, axs = plt.subplots(1, max(1, len(keys)), figsize=(2.6 * max(1, len(keys)), 2.6), squeeze=False)
        for ax, k in zip(axs[0], keys):
            pts = [(r["seed"], r["measures"].get(k)) for r in records if r["measures"].get(k) is not None]
            ax.plot([s for s, _ in pts], [v for _, v in pts], "o", ms=3)
            ax.set_title(k, fontsize=7)
            ax.set_xlabel("seed", fontsize=8)
        fig.suptitle(f"{name}: {len(records)} runs", fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def main(args) -> dict:
    """``python -m theory sweep``: run, write the records, optionally draw the figure; returns the summary."""
    out = args.out or f"sweeps/{args.name}.jsonl"
    summary = execute(args.name, seeds=args.seeds, out=out, resume=args.resume, workers=args.workers,
                      scheduler=args.scheduler, overrides=args.param, progress=not args.quiet)
    if args.figure:
        recs = [r for r in read_records(Path(out)) if r.get("sweep") == args.name]
        Path(args.figure).write_bytes(figure(recs, args.name))
        summary["figure"] = args.figure
    return summary
