"""Issue 38 measurements (not assertions): the angle between the Frobenius and the nuclear-norm Graph-SVM on
random problems, and where GD on the factors (W_K, W_Q) goes on problems where the two differ by >= 10°.

    .venv/bin/python benchmarks/nuclear_angles.py [--problems 30] [--steps 100000] [--gd-problems 4]
    .venv/bin/python benchmarks/nuclear_angles.py --claims [--problems 30]   # the factorized path's numbers

Problems: Hypothesis draws of ``strategies.problems.drawn_problems`` (shapes acyclic/cyclic/mixed, K <= 6,
every embedding kind) under a fixed ``hypothesis.seed``, duplicates removed (Hypothesis mutates its
examples, so consecutive draws repeat), the first ``--problems`` distinct ones kept.

Where GD goes is read two ways: the correlation of ``W(T)`` itself with each SVM direction (slow: the
finite part ``W^fin`` decays like ``1/log T``), and that of the last decade's increment
``W(T) - W(T/10)`` (the finite part cancels to first order).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis import seed as hseed

from strategies.problems import drawn_problems, structures_of
from theory.core.problem import Problem
from theory.li2024.factorized import train_factorized
from theory.li2024.nuclear import angle_degrees, nuclear_norm, nuclear_svm
from theory.li2024.svm import SolverError, graph_svm


def draw_problems(n: int, seed: int = 38):
    out = []
    strat = drawn_problems(structures=structures_of(["acyclic", "cyclic", "mixed"], K=st.integers(2, 6)))

    seen = set()

    @hseed(seed)
    @settings(max_examples=20 * n, database=None, derandomize=False, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(dp=strat)
    def collect(dp):
        key = str(dp.problem.to_json())
        if key not in seen and len(out) < n:
            seen.add(key)
            out.append(dp)

    collect()
    return out[:n]


def gaussian_problems(n: int, seed: int = 38):
    """``n`` random problems: K in 3..6 tokens, d in {K, K + 2}, Gaussian embeddings (rows normalized),
    4..10 sequences of 2..6 tokens drawn uniformly (the last is the query), each label a token of its
    sequence (Assumption 1's 'labels in sequences'), the default head.  Problems with no ⇒ edge are kept
    (W^svm = 0) and skipped by the caller."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        K = int(rng.integers(3, 7))
        d = K + int(rng.choice([0, 2]))
        E = rng.standard_normal((K, d))
        E /= np.linalg.norm(E, axis=1, keepdims=True)
        seqs = [rng.integers(0, K, size=int(rng.integers(2, 7))).tolist() for _ in range(int(rng.integers(4, 11)))]
        labels = [int(rng.choice(s)) for s in seqs]
        out.append(Problem.create(E, seqs, labels, "log"))
    return out


def claims(n: int) -> None:
    """The numbers of docs/theory.md's section on the factorized layer, on the first ``n`` Gaussian problems."""
    from collections import Counter

    from theory.li2024 import factorized_claims as fc
    from theory.li2024.analysis import analyze
    from theory.li2024.kq_path import nuclear_path
    from theory.li2024.regpath import RoundingLevel
    from theory.li2024.regpath_verdict import finite_errors, margin_offset

    reach, valid, planted, finite = Counter(), Counter(), Counter(), []
    t0 = time.time()
    for i, p in enumerate(gaussian_problems(n)):
        fro = graph_svm(p, exact=False)
        nuc = nuclear_svm(p)
        a = angle_degrees(nuc.W, fro.W)
        if a is None:
            continue
        ts = [1, 2, 4, 8, 16, 32, 64]
        pts = []
        for t in ts:
            try:
                pts += nuclear_path(p, [nuc.norm * t], resume=pts[-1] if pts else None)
            except RoundingLevel:
                reach[f"stops at t = {t} (float64 rounding level)"] += 1
                break
            except SolverError:
                reach[f"stops at t = {t} (not certified)"] += 1
                break
        else:
            reach["certified through t = 64"] += 1
        v = fc.judge_kq_path(p)
        valid[(">= 10°" if a >= 10 else "< 10°", v.outcome.value)] += 1
        w = fc.judge_kq_path(p, target=fro.W) if a >= 10 else None
        if w is not None:
            planted[w.outcome.value] += 1
        an = analyze(p)
        if an.finite is not None and an.space.dim:
            ms = margin_offset(p, an) + fc.PATH_MARGINS
            fp, _ = fc._certified_prefix(p, [nuclear_norm(an.finite.W + t * nuc.W) for t in ms])
            f = finite_errors(fp, an.space, an.finite.W)
            finite.append((i, len(fp), float(f[-1])))
        print(f"#{i} angle {a:.1f}: kq_path {v.outcome.value}"
              + (f", against W^svm {w.outcome.value}" if w is not None else ""), flush=True)
    print("path reach:", dict(reach))
    print("kq_path against W^nuc:", dict(valid))
    print("kq_path against the planted W^svm (>= 10° apart):", dict(planted))
    print("S_fin part's distance to W^fin at the last certified base margin (problem, radii, distance):", finite)
    print(f"{time.time() - t0:.0f}s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=30)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--gd-problems", type=int, default=4)
    ap.add_argument("--source", choices=["gaussian", "hypothesis"], default="gaussian")
    ap.add_argument("--claims", action="store_true",
                    help="instead: the factorized path's reach (radii t ||W^nuc||_*, t = 1..64), the claim "
                         "li2024.kq_path against W^nuc and against the planted W^svm, and the path's S_fin part")
    args = ap.parse_args()
    if args.claims:
        return claims(args.problems)
    rows, failures = [], []
    t0 = time.time()
    class _Drawn:  # a Gaussian problem in DrawnProblem's shape
        def __init__(self, p):
            self.problem, self.structure = p, type("S", (), {"shape": "random"})()

    source = (draw_problems(args.problems) if args.source == "hypothesis"
              else [_Drawn(p) for p in gaussian_problems(args.problems)])
    for i, dp in enumerate(source):
        p = dp.problem
        fro = graph_svm(p, exact=False)
        try:
            nuc = nuclear_svm(p)
        except SolverError as exc:
            failures.append((i, str(exc), json.dumps(p.to_json())))
            continue
        a = angle_degrees(nuc.W, fro.W)
        if a is None:
            continue
        rows.append((i, dp, a, nuclear_norm(fro.W) / nuc.norm, np.linalg.norm(nuc.W) / np.linalg.norm(fro.W),
                     nuc.certificate["gap"], fro, nuc))
    angles = np.array([r[2] for r in rows])
    print(f"{len(rows)} problems with W^svm != 0 ({time.time() - t0:.1f}s); angle (degrees): "
          f"min {angles.min():.2f} median {np.median(angles):.2f} max {angles.max():.2f}; "
          f">= 10°: {(angles >= 10).sum()}, < 1°: {(angles < 1).sum()}")
    print("quantiles 10/25/50/75/90:", np.round(np.percentile(angles, [10, 25, 50, 75, 90]), 2).tolist())
    print(f"nuclear SVM not certified on {len(failures)}:")
    for f in failures:
        print("  ", f)
    print("max gap", max(r[5] for r in rows))
    for r in rows:
        print(f"  #{r[0]:2d} K={r[1].problem.K} d={r[1].problem.d} shape={r[1].structure.shape:8s} "
              f"angle={r[2]:6.2f}  ||Wf||_*/||Wn||_*={r[3]:.4f}  ||Wn||_F/||Wf||_F={r[4]:.4f}")
    big = [r for r in rows if r[2] >= 10][:args.gd_problems]
    for r in big:
        p = r[1].problem
        # control: GD on W itself (Li et al.'s setting, Theorem 1: direction -> the Frobenius W^svm)
        from theory.li2024.training import train
        from theory.li2024.losses import safe_step
        ctl = train(p, args.steps, safe_step(p), checkpoints=[args.steps // 10, args.steps], engine="numpy")
        cW, pW = ctl.checkpoints[-1].W, ctl.checkpoints[0].W
        rank = lambda W: int((np.linalg.svd(W, compute_uv=False) > 1e-6 * np.linalg.norm(W, 2)).sum())
        print(f"W-GD #{r[0]} K={p.K} d={p.d} rank(Wf)={rank(r[6].W)} rank(Wn)={rank(r[7].W)}: step {args.steps} "
              f"angle_to_frob {angle_degrees(cW, r[6].W):.2f} angle_to_nuc {angle_degrees(cW, r[7].W):.2f}; "
              f"increment: {angle_degrees(cW - pW, r[6].W):.2f} / {angle_degrees(cW - pW, r[7].W):.2f}")
        for m in sorted({p.d, max(1, p.d // 2)}):
            t = time.time()
            run = train_factorized(p, args.steps, m, seed=0, frobenius=r[6].W, nuclear=r[7].W)
            c = run.final
            W = run.checkpoints
            mid = W[len(W) // 2]
            prev = min(W, key=lambda k: abs(k.step - c.step / 10))
            dW = c.W - prev.W
            inc = (angle_degrees(dW, r[6].W), angle_degrees(dW, r[7].W))
            print(f"GD #{r[0]} K={p.K} d={p.d} m={m} angle={r[2]:.1f}: step {c.step} loss {c.loss:.4g} "
                  f"||W|| {c.norm:.3g} corr_frob {c.corr_frobenius:.4f} corr_nuc {c.corr_nuclear:.4f} "
                  f"angle_to_frob {np.degrees(np.arccos(min(1, c.corr_frobenius))):.2f} "
                  f"angle_to_nuc {np.degrees(np.arccos(min(1, c.corr_nuclear))):.2f} "
                  f"(at step {mid.step}: {mid.corr_frobenius:.4f}/{mid.corr_nuclear:.4f}); increment "
                  f"{prev.step}->{c.step}: angle_to_frob {inc[0]:.2f} angle_to_nuc {inc[1]:.2f} {time.time() - t:.0f}s")


if __name__ == "__main__":
    main()
