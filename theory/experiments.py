"""The experiments of Li et al. 2024, as ``python -m theory reproduce li-cyclic | li-acyclic | li-local``.

Setting (THEORY.md, "How the paper measures"): unit-norm Gaussian embeddings; each sample has ``T``
distinct tokens drawn from ``[K]``, its last token is the query and its label is drawn from the sample;
cyclic and acyclic datasets are obtained by rejection; normalized GD from a small random ``W(0)``
(scale ``INIT_SCALE``), float64.  Each trial draws its own dataset and embeddings from ``seed + trial``.
"""
from __future__ import annotations

import numpy as np

from theory.analysis import analyze
from theory.graphs import token_priority_graphs
from theory.problem import Problem
from theory.training import train

INIT_SCALE = 0.01
MAX_REJECTIONS = 10_000

SETTINGS = {
    "li-cyclic": dict(n=6, T=4, K=6, d=8, cyclic=True, eta=0.01, steps=4000),
    "li-acyclic": dict(n=4, T=6, K=8, d=8, cyclic=False, eta=0.01, steps=4000),
    "li-local": dict(n=4, T=6, K=8, d=8, cyclic=None, eta=0.1, steps=2000),
}


def paper_problem(rng, n, T, K, d, cyclic=None, loss="log", tied_head=False) -> Problem:
    """One dataset of the paper's kind; ``cyclic`` True/False rejects until the TPGs have / lack a cycle.
    ``W^svm = 0`` (no ⇒ edge) is rejected too: every experiment measures a direction."""
    if T > K:
        raise ValueError(f"T={T} distinct tokens need K >= T, got K={K}")
    for _ in range(MAX_REJECTIONS):
        E = rng.normal(size=(K, d))
        E /= np.linalg.norm(E, axis=1, keepdims=True)
        seqs = [list(rng.choice(K, size=T, replace=False)) for _ in range(n)]
        labels = [int(rng.choice(s)) for s in seqs]
        p = Problem.create(E, seqs, labels, loss, E if tied_head else None)
        graphs = token_priority_graphs(p)
        has_cycle = any(len(c) > 1 for g in graphs.values() for c in g.sccs)
        has_edge = any(g.dominates() for g in graphs.values())
        if has_edge and (cyclic is None or has_cycle == cyclic):
            return p
    raise ValueError(f"no dataset with cyclic={cyclic} after {MAX_REJECTIONS} draws (n={n}, T={T}, K={K})")


def _summary(values) -> dict:
    v = np.asarray(values, dtype=float)
    return {"mean": float(v.mean()), "std": float(v.std()), "values": v.tolist()}


def _trials(args, default=10) -> int:
    trials = default if getattr(args, "trials", None) is None else args.trials
    if trials < 1:
        raise ValueError(f"--trials: expected a positive integer, got {trials}")
    return trials


def _steps(args, default: int) -> int:
    steps = default if getattr(args, "steps", None) is None else args.steps
    if steps < 1:
        raise ValueError(f"--steps: expected a positive integer, got {steps}")
    return steps


def li_global(name: str, args) -> dict:
    s = SETTINGS[name]
    trials, steps = _trials(args), _steps(args, s["steps"])
    corr, fin, mass = [], [], []
    for t in range(trials):
        rng = np.random.default_rng(getattr(args, "seed", 0) + t)
        p = paper_problem(rng, s["n"], s["T"], s["K"], s["d"], s["cyclic"])
        an = analyze(p, name=f"{name} trial {t}")
        W0 = INIT_SCALE * rng.normal(size=(p.d, p.d))
        c = train(p, steps, s["eta"], normalized=True, W0=W0, analysis=an, checkpoints=[0, steps]).final
        corr.append(c.correlation)
        fin.append(c.finite_error)
        mass.append(c.top_scc_mass)
    return {"experiment": name, "trials": trials, "steps": steps, "eta": s["eta"], "normalized": True,
            "setting": {k: s[k] for k in ("n", "T", "K", "d")},
            "correlation": _summary(corr), "finite_error": _summary(fin), "top_scc_mass": _summary(mass)}


def li_cyclic(args) -> dict:
    return li_global("li-cyclic", args)


def li_acyclic(args) -> dict:
    return li_global("li-acyclic", args)


def li_local(args) -> dict:
    """Section 5: tied head ``C = E`` and the ``ce`` loss; correlation of ``W(τ)`` with the true-TPG SVM
    and with the pseudo-TPG SVM built from the tokens GD selects (:mod:`theory.pseudo`)."""
    from theory.pseudo import pseudo_svm

    s = SETTINGS["li-local"]
    trials, steps = _trials(args), _steps(args, s["steps"])
    true_c, pseudo_c, ambiguous = [], [], []
    for t in range(trials):
        rng = np.random.default_rng(getattr(args, "seed", 0) + t)
        p = paper_problem(rng, s["n"], s["T"], s["K"], s["d"], None, loss="ce", tied_head=True)
        an = analyze(p, name=f"li-local trial {t}", finite=False)
        W0 = INIT_SCALE * rng.normal(size=(p.d, p.d))
        W = train(p, steps, s["eta"], normalized=True, W0=W0, checkpoints=[0, steps]).final.W
        ps = pseudo_svm(p, W, name=f"li-local trial {t}")
        nW = np.linalg.norm(W)
        true_c.append(float(np.sum(W * an.svm.W) / (nW * an.svm.norm)))
        pseudo_c.append(float(np.sum(W * ps.svm.W) / (nW * ps.svm.norm)) if ps.svm.norm > 0 else float("nan"))
        ambiguous.append(ps.ambiguous)
    return {"experiment": "li-local", "trials": trials, "steps": steps, "eta": s["eta"], "normalized": True,
            "setting": {k: s[k] for k in ("n", "T", "K", "d")}, "head": "tied (C = E)", "loss": "ce",
            "correlation_true_tpg": _summary(true_c), "correlation_pseudo_tpg": _summary(pseudo_c),
            "ambiguous_tokens": _summary(ambiguous)}
