"""Tian et al. 2023, Fig. 5: Syn-Small trained with Adam (``python -m theory reproduce tian-fig5``).

Paper (Sec. 8): "if we use Adam optimizer instead, self-attention with different learning rate picks different
subsets of distinct tokens to focus on, showing tune-able inductive bias (Fig. 5)".  No numbers are printed.

Protocol, reconstructed from the authors' ``ssl/real-dataset/decoder_only.py`` (facebookresearch/luckmatters,
read only): with ``opt.method=adam`` the decoder (``K1``, our ``Y``) and the attention logits (``K2``, our ``Z``)
get one ``torch.optim.Adam`` each, learning rates ``lr_y`` and ``lr_z`` (here equal, ``lr_y = lr_z = lr``),
PyTorch defaults ``betas = (0.9, 0.999)``, ``eps = 1e-8``, ``weight_decay = 0`` (the Scan-and-Snap runs use
``opt.wd=0``).  Everything else is Syn-Small as in :mod:`theory.tian2023.experiments` (zero init, batch 128,
``T = 128``, the paper's layout).  The gradients are :func:`theory.tian2023.model.forward_grads_by_class` on batches
of :func:`theory.tian2023.model.sample_counts`; the Adam step is written here (PyTorch's update rule with bias
correction), all rates of one seed trained as one batch of models on the same data stream.

"Different subsets" is quantified, not eyeballed.  For each class, the distinct tokens are ranked by
probability (rank 0 = the least likely); the final attention ``c_n`` restricted to them and renormalized gives

* the top-``k`` set (``k = 3``) of ranks, and the modal set per learning rate over seeds and classes;
* the attention centroid, ``sum_r r p_r`` (where on the probability scale the attention sits);
* the mean Jaccard overlap of top-``k`` sets between runs at the *same* rate (other seeds / the other class)
  and between runs at *different* rates.

Claim (a property in ``properties/tian2023/test_figures.py``): within-rate overlap exceeds across-rate overlap by
``>= SUBSET_MARGIN`` and at least ``MIN_SUBSETS`` distinct modal subsets occur over the rates.  SGD (the paper's
Fig. 4 setting, any rate) always focuses on the most likely tokens: the same criterion must fail there.
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from theory.tian2023.model import (ScanSnapError, SequenceClasses, c_limit, distinct_entropy, forward_grads_by_class,
                             sample_counts, syn_layout, train_sgd)

ADAM_RATES = (0.01, 0.03, 0.1, 0.3, 1.0)
ADAM_STEPS = 2000
TOP_K = 3
SUBSET_MARGIN = 0.3
MIN_SUBSETS = 3
BETAS, EPS = (0.9, 0.999), 1e-8


def train_adam(classes: SequenceClasses, *, steps: int, lr_y, lr_z, batch: int = 128, T: int = 128, seed: int = 0,
               betas=BETAS, eps: float = EPS):
    """Adam on sampled sequences from ``Y = Z = 0``, one optimizer per layer (PyTorch update with bias correction).
    ``lr_y``, ``lr_z``: scalars or arrays of length ``S`` (``S`` models on the same batches).  Returns ``(Y, Z)``,
    each ``(S, M, M)``."""
    lr_y = np.atleast_1d(np.asarray(lr_y, float))
    lr_z = np.atleast_1d(np.asarray(lr_z, float))
    S = max(len(lr_y), len(lr_z))
    if len(lr_y) not in (1, S) or len(lr_z) not in (1, S):
        raise ScanSnapError("lr_y, lr_z: arrays of learning rates must have the same length")
    if not (np.all(np.isfinite(lr_y)) and np.all(np.isfinite(lr_z))) or (lr_y < 0).any() or (lr_z < 0).any():
        raise ScanSnapError("lr_y, lr_z: expected finite non-negative learning rates")
    for name, v, lo in (("steps", steps, 0), ("batch", batch, 1), ("T", T, 2)):
        if isinstance(v, bool) or int(v) != v or v < lo:
            raise ScanSnapError(f"{name}: expected an integer >= {lo}, got {v!r}")
    lr_y = np.broadcast_to(lr_y, (S,))[:, None, None]
    lr_z = np.broadcast_to(lr_z, (S,))[:, None, None]
    b1, b2 = betas
    rng = np.random.default_rng(seed)
    M = classes.M
    Y = np.zeros((S, M, M))
    Z = np.zeros((S, M, M))
    mY, vY, mZ, vZ = (np.zeros_like(Y) for _ in range(4))
    w = np.full(batch, 1.0 / batch)
    for k in range(1, int(steps) + 1):
        labels, counts = sample_counts(rng, classes, batch, T)
        _, dY, dZ = forward_grads_by_class(Y, Z, counts, labels, classes, w)
        mY = b1 * mY + (1 - b1) * dY
        vY = b2 * vY + (1 - b2) * dY * dY
        mZ = b1 * mZ + (1 - b1) * dZ
        vZ = b2 * vZ + (1 - b2) * dZ * dZ
        c1, c2 = 1 - b1 ** k, 1 - b2 ** k
        Y = Y - lr_y * (mY / c1) / (np.sqrt(vY / c2) + eps)
        Z = Z - lr_z * (mZ / c1) / (np.sqrt(vZ / c2) + eps)
    return Y, Z


def distinct_profile(C: np.ndarray, classes: SequenceClasses, n: int, k: int = TOP_K) -> dict:
    """Class ``n``'s renormalized distinct-token attention by probability rank, its top-``k`` ranks and centroid."""
    d = classes.distinct_tokens(n)
    p = C[n, d] / C[n, d].sum()
    top = sorted(int(i) for i in np.argsort(-p, kind="stable")[:k])
    return {"attention_by_rank": [round(float(x), 5) for x in p], "top": top,
            "centroid": round(float(np.dot(np.arange(len(d)), p)), 4),
            "entropy": round(distinct_entropy(C[n], classes, n), 5)}


def jaccard(a, b) -> float:
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 1.0


def subset_statistics(runs: list[dict]) -> dict:
    """``runs``: dicts with ``rate`` and ``top`` (one per seed x class).  Within / across-rate top-k overlap,
    modal subset per rate, number of distinct modal subsets."""
    within, across = [], []
    for a, b in itertools.combinations(runs, 2):
        (within if a["rate"] == b["rate"] else across).append(jaccard(a["top"], b["top"]))
    modal = {}
    for rate in sorted({r["rate"] for r in runs}):
        sets = [tuple(r["top"]) for r in runs if r["rate"] == rate]
        modal[rate] = list(max(set(sets), key=lambda s: (sets.count(s), s)))
    return {"within_rate_overlap": round(float(np.mean(within)), 4) if within else None,
            "across_rate_overlap": round(float(np.mean(across)), 4) if across else None,
            "modal_subsets": {f"{k:g}": v for k, v in modal.items()},
            "distinct_modal_subsets": len({tuple(v) for v in modal.values()})}


def subset_violations(stats: dict, *, margin: float = SUBSET_MARGIN, min_subsets: int = MIN_SUBSETS) -> list[str]:
    out = []
    w, a = stats["within_rate_overlap"], stats["across_rate_overlap"]
    if w is None or a is None or not w - a >= margin:
        out.append(f"top-k overlap within a rate ({w}) does not exceed the overlap across rates ({a}) by {margin}")
    if stats["distinct_modal_subsets"] < min_subsets:
        out.append(f"only {stats['distinct_modal_subsets']} distinct modal top-k subsets over the rates "
                   f"(need {min_subsets}): {stats['modal_subsets']}")
    return out


def adam_runs(*, rates=ADAM_RATES, seeds: int = 3, base: int = 0, steps: int = ADAM_STEPS, optimizer: str = "adam",
              batch: int = 128, T: int = 128) -> list[dict]:
    """One row per (rate, seed, class).  ``optimizer="sgd"`` trains the paper's Fig. 4 setting instead (SGD,
    momentum 0.9, ``eta_Y = eta_Z = rate``) -- the contrast the criterion must reject."""
    classes = syn_layout(1, 2, 10, 10)
    rates = np.asarray(rates, float)
    rows = []
    for s in range(seeds):
        if optimizer == "adam":
            _, Z = train_adam(classes, steps=steps, lr_y=rates, lr_z=rates, batch=batch, T=T, seed=base + s)
        elif optimizer == "sgd":
            Z = train_sgd(classes, steps=steps, eta_y=rates, eta_z=rates, batch=batch, T=T, momentum=0.9,
                          seed=base + s).Z
        else:
            raise ScanSnapError(f"optimizer: expected adam or sgd, got {optimizer!r}")
        for j, rate in enumerate(rates):
            C = c_limit(Z[j], classes)
            for n in range(classes.K):
                rows.append({"rate": float(rate), "seed": base + s, "class": n} | distinct_profile(C, classes, n)
                            | {"common_mass": round(float(C[n, classes.common_tokens].sum()), 5)})
    return rows


def tian_fig5(args) -> dict:
    from theory.tian2023.experiments import _int_arg

    seeds = _int_arg(args, "seeds", 3, 1)
    base = _int_arg(args, "seed", 0, 0)
    steps = _int_arg(args, "steps", ADAM_STEPS, 1)
    t0 = time.perf_counter()
    rows = adam_runs(seeds=seeds, base=base, steps=steps)
    stats = subset_statistics(rows)
    per_rate = []
    for rate in ADAM_RATES:
        rs = [r for r in rows if r["rate"] == rate]
        per_rate.append({"lr": rate, "modal_top3_ranks": stats["modal_subsets"][f"{rate:g}"],
                         "centroid_mean": round(float(np.mean([r["centroid"] for r in rs])), 4),
                         "centroid_std": round(float(np.std([r["centroid"] for r in rs])), 4),
                         "entropy_mean": round(float(np.mean([r["entropy"] for r in rs])), 4),
                         "common_mass_mean": round(float(np.mean([r["common_mass"] for r in rs])), 4),
                         "attention_by_rank_mean": np.round(np.mean([r["attention_by_rank"] for r in rs], axis=0), 4).tolist()})
    out = {"experiment": "tian-fig5", "optimizer": "adam (betas 0.9/0.999, eps 1e-8, wd 0), lr_y = lr_z = lr",
           "seeds": seeds, "seed": base, "steps": steps, "top_k": TOP_K,
           "paper": "different learning rates pick different subsets of distinct tokens (no numbers printed)",
           "rates": per_rate, "subsets": stats, "violations": subset_violations(stats), "runs": rows,
           "runtime_s": round(time.perf_counter() - t0, 2)}
    return out


def fig5_figure(result: dict) -> bytes:
    from theory.tian2023.experiments import _png
    from theory.tian2023.snap import _pyplot

    plt = _pyplot()
    rates = result["rates"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for i, r in enumerate(rates):
        color = plt.cm.viridis(i / max(1, len(rates) - 1))
        axes[0].plot(range(len(r["attention_by_rank_mean"])), r["attention_by_rank_mean"], "o-", color=color,
                     label=f"lr={r['lr']:g}: top-3 {r['modal_top3_ranks']}")
    axes[0].set_xlabel("distinct token, rank of P(l|n) (0 = least likely)")
    axes[0].set_ylabel("final attention (renormalized)")
    axes[0].set_title("Adam: where the attention sits, per learning rate", fontsize=9)
    axes[0].legend(fontsize=7)
    axes[1].errorbar([r["lr"] for r in rates], [r["centroid_mean"] for r in rates],
                     yerr=[r["centroid_std"] for r in rates], marker="o", capsize=2)
    axes[1].set_xscale("log")
    axes[1].set_xlabel("learning rate (lr_Y = lr_Z)")
    axes[1].set_ylabel("attention centroid (probability rank)")
    s = result["subsets"]
    axes[1].set_title(f"top-3 overlap within rate {s['within_rate_overlap']}, across {s['across_rate_overlap']}",
                      fontsize=9)
    return _png(fig)
