"""The experiments of Li et al. 2024, as ``python -m theory reproduce li-cyclic | li-acyclic | li-local``.

Setting (docs/theory.md, "How the paper measures"): unit-norm Gaussian embeddings; each sample has ``T``
distinct tokens drawn from ``[K]``, its last token is the query and its label is drawn from the sample;
cyclic and acyclic datasets are obtained by rejection; normalized GD from a small random ``W(0)``
(scale ``INIT_SCALE``), float64.  Each trial draws its own dataset and embeddings from ``seed + trial``.
"""
from __future__ import annotations

import numpy as np

from theory.li2024.analysis import analyze
from theory.li2024.graphs import token_priority_graphs
from theory.core.problem import Problem
from theory.core.protocol import Protocol
from theory.li2024.pseudo import REJECT, SELECT
from theory.li2024.training import train

INIT_SCALE = 0.01
MAX_REJECTIONS = 10_000

_DATA = ("unit-norm Gaussian embeddings; T distinct tokens per sample, the last one the query, the label drawn "
         "from the sample; {kind} datasets by rejection")
PROTOCOLS = {
    "li-cyclic": Protocol("Li et al. 2024, Section 4 experiments", dict(n=6, T=4, K=6, d=8),
                          _DATA.format(kind="cyclic"), "gaussian", {"scale": INIT_SCALE}, 0.01, 4000, True),
    "li-acyclic": Protocol("Li et al. 2024, Section 4 experiments", dict(n=4, T=6, K=8, d=8),
                           _DATA.format(kind="acyclic"), "gaussian", {"scale": INIT_SCALE}, 0.01, 4000, True),
    # Section 5 as the authors' committed notebook runs it (n=6, T=4, K=6, d=8; --shape 4,6,8,8 for the
    # earlier note's sizes): cyclic datasets only, tied head, PyTorch's default init of a d x d linear layer
    # U(-1/sqrt(d), 1/sqrt(d)), eta=0.1, 2000 normalized steps, the pseudo-TPG from the final iterate.
    "li-local": Protocol("Li et al. 2024, Section 5; the authors' notebook for the local-convergence figure",
                         dict(n=6, T=4, K=6, d=8), _DATA.format(kind="cyclic") + "; tied head C = E",
                         "uniform", {"bound_exponent": -0.5}, 0.1, 2000, True,
                         {"select_mass_above": SELECT, "ambiguous_mass_in": [REJECT, SELECT]}),
}
SETTINGS = {name: dict(**pr.sizes, cyclic=(name != "li-acyclic"), eta=pr.step_size, steps=pr.steps)
            for name, pr in PROTOCOLS.items()}


def paper_problem(rng, n, T, K, d, cyclic=None, loss="log", tied_head=False) -> Problem:
    """One dataset of the paper's kind; ``cyclic`` True/False rejects until the TPGs have / lack a cycle
    (a nontrivial SCC in some query's TPG).  ``W^svm = 0`` (no ⇒ edge) is rejected too: every experiment
    measures a direction (no cyclic draw of li-local's sizes lacked a ⇒ edge in 20,000 tried)."""
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
        W0 = PROTOCOLS[name].init_params["scale"] * rng.normal(size=(p.d, p.d))
        c = train(p, steps, s["eta"], normalized=True, W0=W0, analysis=an, checkpoints=[0, steps]).final
        corr.append(c.correlation)
        fin.append(c.finite_error)
        mass.append(c.top_scc_mass)
    return {"experiment": name, "protocol": PROTOCOLS[name].as_dict(), "trials": trials, "steps": steps,
            "eta": s["eta"], "normalized": True,
            "setting": {k: s[k] for k in ("n", "T", "K", "d")},
            "correlation": _summary(corr), "finite_error": _summary(fin), "top_scc_mass": _summary(mass)}


def li_cyclic(args) -> dict:
    return li_global("li-cyclic", args)


def li_acyclic(args) -> dict:
    return li_global("li-acyclic", args)


def _stats(values) -> dict:
    """mean, std, standard error and the per-trial values (NaN-free values only in the moments)."""
    v = np.asarray(values, dtype=float)
    ok = v[np.isfinite(v)]
    n = len(ok)
    return {"mean": float(ok.mean()) if n else float("nan"), "std": float(ok.std()) if n else float("nan"),
            "sem": float(ok.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan"), "n": n, "values": v.tolist()}


def _corr_series(Ws, V) -> np.ndarray:
    nv = np.linalg.norm(V)
    if nv == 0:
        return np.full(len(Ws), np.nan)
    nw = np.linalg.norm(Ws, axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.einsum("tij,ij->t", Ws, V) / (nw * nv)


def _gd_limit(problem: Problem, data, steps: int, eta: float, cps) -> np.ndarray:
    """The paper's W^fin: normalized GD from 0 on the reduced dataset ``data`` (``W(τ)`` at ``cps``)."""
    from theory.li2024.training import run_gd

    E = problem.E
    if data.counts.shape[0] == 0:
        return np.zeros((len(cps), problem.d, problem.d))
    Bs, _ = run_gd(np.zeros((problem.K, problem.K)), data, problem.gram, eta, cps, normalized=True)
    return np.array([-E.T @ B @ E for B in Bs])


def _local_trial(t: int, rng, s: dict, loss: str, steps: int, cps) -> dict:
    from theory.li2024.finite import NoFiniteMinimizer, finite_component, limit_data
    from theory.li2024.pseudo import label_scc_mask, pseudo_svm, selected_scc_mask
    from theory.li2024.subspace import cyclic_subspace
    from theory.li2024.svm import SolverError
    from theory.li2024.training import train

    name = f"li-local trial {t}"
    p = paper_problem(rng, s["n"], s["T"], s["K"], s["d"], s["cyclic"], loss=loss, tied_head=True)
    an = analyze(p, name=name, finite=False)
    b = PROTOCOLS["li-local"].init_bound(p.d)
    W0 = rng.uniform(-b, b, size=(p.d, p.d))
    traj = train(p, steps, s["eta"], normalized=True, W0=W0, checkpoints=cps)
    Ws = np.array([c.W for c in traj.checkpoints])
    W = Ws[-1]
    ps = pseudo_svm(p, W, name=name)
    out = {"corr_true": _corr_series(Ws, an.svm.W), "corr_pseudo": _corr_series(Ws, ps.svm.W),
           "ambiguous": ps.ambiguous,
           "pseudo_equals_true": bool(np.linalg.norm(ps.svm.W - an.svm.W) <= 1e-6 * max(an.svm.norm, 1e-300)),
           "selected_label_scc": all(set(sel) == set(np.flatnonzero(row)) for sel, row in
                                     zip(ps.selection.selected, label_scc_mask(p, an.graphs))),
           "selected_sizes": [len(x) for x in ps.selection.selected], "pseudo_svm_norm": ps.svm.norm,
           "init_max_abs": float(np.abs(W0).max())}
    # Norm differences ||Π_{S_fin} W(τ) - W^fin||: the paper's W^fin is GD on the reduced dataset (each
    # sample kept on its label's SCC, iterate τ compared with iterate τ); the certified one minimizes L̃.
    for key, graphs, space, paper_mask, cert_mask in (
            ("true", an.graphs, an.space, None, None),
            ("pseudo", ps.graphs, cyclic_subspace(p, ps.graphs), label_scc_mask(p, ps.graphs),
             selected_scc_mask(p, ps.graphs, ps.selection))):
        proj = np.array([space.project(Wt) for Wt in Ws])
        fin_gd = _gd_limit(p, limit_data(p, graphs, loss, paper_mask), steps, s["eta"], cps)
        out[f"normdiff_paper_{key}"] = np.linalg.norm(proj - fin_gd, axis=(1, 2))
        try:
            fin = finite_component(p, graphs, space, loss=loss, name=f"{key} TPG of {name}", mask=cert_mask).W
            out[f"normdiff_certified_{key}"] = float(np.linalg.norm(proj[-1] - fin))
        except NoFiniteMinimizer:  # L̃ falls toward infinity on S_fin (e.g. the true TPG under a tied head)
            out[f"normdiff_certified_{key}"] = float("nan")
            out[f"finite_absent_{key}"] = True
        except SolverError:  # L̃ without a certified stationary point on S_fin (non-convex losses)
            out[f"normdiff_certified_{key}"] = float("nan")
        out[f"sfin_dim_{key}"] = space.dim
    return out


def li_local(args) -> dict:
    """Section 5: tied head ``C = E`` and the ``ce`` (or ``lsq``) loss; correlation of ``W(τ)`` with the
    true-TPG SVM and with the pseudo-TPG SVM built from the tokens GD selects at the final iterate
    (:mod:`theory.li2024.pseudo`), and the norm differences of the paper's second panel."""
    s = dict(SETTINGS["li-local"])
    shape = getattr(args, "shape", None)
    if shape:
        try:
            s["n"], s["T"], s["K"], s["d"] = (int(x) for x in str(shape).split(","))
        except ValueError:
            raise ValueError(f"--shape: expected n,T,K,d (four integers), got {shape!r}") from None
    loss = getattr(args, "loss", None) or "ce"
    if loss not in ("ce", "lsq"):
        raise ValueError(f"--loss: expected ce or lsq for li-local, got {loss!r}")
    trials, steps = _trials(args, default=40), _steps(args, s["steps"])
    cps = np.unique(np.concatenate([np.arange(0, steps + 1, max(1, steps // 200)), [steps]]))
    runs = [_local_trial(t, np.random.default_rng(getattr(args, "seed", 0) + t), s, loss, steps, cps)
            for t in range(trials)]
    ct = np.array([r["corr_true"] for r in runs])
    cp = np.array([r["corr_pseudo"] for r in runs])
    out = {"experiment": "li-local", "protocol": PROTOCOLS["li-local"].as_dict(), "trials": trials, "steps": steps,
           "eta": s["eta"], "normalized": True,
           "setting": {k: s[k] for k in ("n", "T", "K", "d")}, "head": "tied (C = E)", "loss": loss,
           "init": "U(-1/sqrt(d), 1/sqrt(d))", "datasets": "cyclic (a nontrivial SCC in some query's TPG)",
           "selection": "attention mass > 1e-2 selected, (0.009, 0.01] ambiguous (left out)",
           "correlation_true_tpg": _stats(ct[:, -1]), "correlation_pseudo_tpg": _stats(cp[:, -1]),
           "pseudo_equals_true": int(sum(r["pseudo_equals_true"] for r in runs)),
           "selected_exactly_the_label_scc": int(sum(r["selected_label_scc"] for r in runs)),
           "ambiguous_tokens": {"total": int(sum(r["ambiguous"] for r in runs)),
                                "trials_with_any": int(sum(r["ambiguous"] > 0 for r in runs)),
                                "values": [int(r["ambiguous"]) for r in runs]},
           "pseudo_svm_zero": int(sum(r["pseudo_svm_norm"] == 0 for r in runs)),
           "init_max_abs": [r["init_max_abs"] for r in runs]}
    for kind in ("paper", "certified"):
        for key in ("true", "pseudo"):
            v = [r[f"normdiff_{kind}_{key}"] for r in runs]
            out[f"norm_difference_{kind}_{key}_tpg"] = _stats([x[-1] if np.ndim(x) else x for x in v])
    # Trials whose certified W^fin does not exist (L̃ falls toward infinity on S_fin under the tied head):
    # their certified norm difference is null, and this says why.
    out["no_finite_minimizer"] = {key: int(sum(bool(r.get(f"finite_absent_{key}")) for r in runs))
                                  for key in ("true", "pseudo")}
    out["curves"] = {"tau": cps.tolist(),
                     "true_mean": _by_checkpoint(ct, np.nanmean), "true_std": _by_checkpoint(ct, np.nanstd),
                     "pseudo_mean": _by_checkpoint(cp, np.nanmean), "pseudo_std": _by_checkpoint(cp, np.nanstd),
                     "normdiff_true_mean": np.mean([r["normdiff_paper_true"] for r in runs], axis=0).tolist(),
                     "normdiff_pseudo_mean": np.mean([r["normdiff_paper_pseudo"] for r in runs], axis=0).tolist()}
    return out


def _by_checkpoint(a, statistic) -> list:
    """Per checkpoint, ``statistic`` over the trials that define the value there; None where none does (the
    pseudo-TPG's correlation before any trial has selected tokens), not numpy's NaN and its warning."""
    return [float(statistic(c)) if np.isfinite(c).any() else None for c in np.asarray(a, float).T]


def li_local_figure(result: dict) -> bytes:
    """Both correlations against τ (mean ± std band over trials), and the paper's norm differences."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = result["curves"]
    tau = np.asarray(c["tau"])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.6))
    for key, label, color in (("true", "true TPG", "tab:blue"), ("pseudo", "pseudo TPG", "tab:red")):
        m, sd = np.asarray(c[f"{key}_mean"], dtype=float), np.asarray(c[f"{key}_std"], dtype=float)  # None: NaN
        ax.plot(tau, m, color=color, label=f"corr(W, W^svm) {label}: {m[-1]:.3f}")
        ax.fill_between(tau, m - sd, np.minimum(m + sd, 1.0), color=color, alpha=0.2)
        bx.plot(tau, c[f"normdiff_{key}_mean"], color=color, label=label)
    st = result["setting"]
    ax.set_title(f"li-local, loss {result['loss']}, {result['trials']} trials "
                 f"(n={st['n']}, T={st['T']}, K={st['K']}, d={st['d']})", fontsize=9)
    ax.set_xlabel("iteration τ")
    ax.set_ylabel("correlation")
    ax.set_ylim(min(0.0, float(np.nanmin(np.asarray(c['true_mean'], dtype=float)
                                           - np.asarray(c['true_std'], dtype=float)))), 1.02)
    ax.legend(fontsize=8, loc="lower right")
    bx.set_title("||Π_Sfin W(τ) - W^fin(τ)|| (W^fin by GD on the reduced dataset)", fontsize=9)
    bx.set_xlabel("iteration τ")
    bx.legend(fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
