"""Reproductions of Tian et al. 2023, Sec. 8: Syn-Small and Syn-Medium (``python -m theory reproduce NAME``).

Both train the reparameterized model (:mod:`theory.tian2023.model`) by SGD with momentum 0.9, batch 128 and
sequence length ``T = 128`` (127 contextual tokens + the query) on the paper's layout
(:func:`theory.tian2023.model.syn_layout`: 10 common tokens of unnormalized probability 1, 10 distinct tokens per
class with unnormalized probabilities ``linspace(0.1, 1, 10)``).

Choices the paper leaves open (documented here, used by both):

* Syn-Small runs its protocol's ``steps`` (1000) iterations ("until convergence": the attention is frozen long before) from
  ``Y = Z = 0``, one query token, two classes; several seeds are averaged when ``--seeds`` is given.
* Syn-Medium's "random init" draws every entry of ``Y(0)`` and ``Z(0)`` i.i.d. ``N(0, INIT_SCALE^2)``; its
  common tokens are shared by all classes; the 16 learning-rate cells of one seed see the same data stream
  (common random numbers) and are trained as one vectorized batch of models.

Runtime (2 cores): syn-small about 1 s; syn-medium with the default 10 seeds about 30-60 s.
"""
from __future__ import annotations

import io
import time
from dataclasses import asdict, dataclass

import numpy as np

from theory.tian2023.model import ScanSnapError, c_limit, distinct_entropy, syn_layout, train_sgd

__all__ = ["PROTOCOLS", "SynProtocol", "syn_medium", "syn_medium_figure", "syn_small", "syn_small_figure"]


@dataclass(frozen=True)
class SynProtocol:
    """A synthetic experiment of Sec. 8 as data, printed in its JSON and pinned by a test.

    ``layout``: :func:`theory.tian2023.model.syn_layout`'s arguments per number of query tokens (``queries``
    lists the counts run); ``rates``: the ``(eta_Y, eta_Z)`` pairs; ``init``: ``"zero"`` or ``"gaussian"``
    (every entry of ``Y(0)``, ``Z(0)`` i.i.d. ``N(0, init_scale^2)``); the SGD's ``momentum``, ``batch`` and
    sequence length ``T`` (contextual tokens + the query); ``source``: where each number comes from."""

    source: str
    queries: tuple
    per_query: int
    n_common: int
    n_distinct: int
    distinct_range: tuple
    rates: tuple
    steps: int
    init: str
    init_scale: float
    momentum: float
    batch: int
    T: int

    def layout(self, n_queries: int):
        lo, hi = self.distinct_range
        return syn_layout(n_queries, self.per_query, self.n_common, self.n_distinct, distinct_low=lo, distinct_high=hi)

    def as_dict(self) -> dict:
        return asdict(self)


_SOURCE = ("Tian et al. 2023, Sec. 8: vocabulary 30 (tokens 0-9 common, 10-19 and 20-29 distinct per class, "
           "increasing probabilities), SGD with momentum, batch 128; the rest documented in this module")
PROTOCOLS = {
    "syn-small": SynProtocol(_SOURCE, queries=(1,), per_query=2, n_common=10, n_distinct=10,
                             distinct_range=(0.1, 1.0), rates=((1.0, 1.0), (10.0, 1.0)), steps=1000, init="zero",
                             init_scale=0.0, momentum=0.9, batch=128, T=128),
    "syn-medium": SynProtocol(_SOURCE, queries=(1, 3, 5, 10), per_query=2, n_common=10, n_distinct=10,
                              distinct_range=(0.1, 1.0),
                              rates=tuple((ez * r, ez) for ez in (0.5, 1.0, 2.0, 3.0) for r in (1.0, 2.0, 5.0, 10.0)),
                              steps=100, init="gaussian", init_scale=0.1, momentum=0.9, batch=128, T=128),
}
# The names the recall experiment uses: it shares Syn-Medium's protocol.
_MEDIUM = PROTOCOLS["syn-medium"]
MEDIUM_QUERIES = _MEDIUM.queries
MEDIUM_ETA_Z = tuple(dict.fromkeys(ez for _, ez in _MEDIUM.rates))
MEDIUM_RATIO = tuple(dict.fromkeys(ey / ez for ey, ez in _MEDIUM.rates))  # eta_Y / eta_Z
MEDIUM_STEPS = _MEDIUM.steps
INIT_SCALE = _MEDIUM.init_scale
MOMENTUM, BATCH, SEQ_LEN = _MEDIUM.momentum, _MEDIUM.batch, _MEDIUM.T


def _int_arg(args, name, default, lo):
    v = getattr(args, name, None)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ScanSnapError(f"{name}: expected an integer >= {lo}, got {v!r}")
    return int(v)


def syn_small(args, *, protocol: SynProtocol = PROTOCOLS["syn-small"]) -> dict:
    """Syn-Small: per class and learning-rate pair, the final attention ``c_n`` on the class's distinct tokens
    (in order of increasing probability) and the mass left on the common tokens (mean over seeds).  A reduced
    run passes its own ``protocol`` (``dataclasses.replace`` of the paper's), and the JSON prints that one."""
    seeds = _int_arg(args, "seeds", 1, 1)
    base = _int_arg(args, "seed", 0, 0)
    pr = protocol
    steps = pr.steps
    classes = pr.layout(pr.queries[0])
    t0 = time.perf_counter()
    runs = []
    for eta_y, eta_z in pr.rates:
        finals, history = [], []
        for s in range(seeds):
            res = train_sgd(classes, steps=steps, eta_y=eta_y, eta_z=eta_z, batch=pr.batch, T=pr.T,
                            momentum=pr.momentum, init_scale=pr.init_scale, seed=base + s,
                            record_every=max(1, steps // 50))
            finals.append(c_limit(res.Z[0], classes))
            history.append(np.array([c_limit(z[0], classes) for z in res.Z_hist]))
        C = np.mean(finals, axis=0)
        H = np.mean(history, axis=0)
        per_class = []
        for n in range(classes.K):
            d = classes.distinct_tokens(n)
            per_class.append({"class": n, "distinct_tokens": d.tolist(),
                              "distinct_attention": [round(float(x), 5) for x in C[n, d]],
                              "common_mass": round(float(C[n, classes.common_tokens].sum()), 5),
                              "distinct_entropy": round(distinct_entropy(C[n], classes, n), 5)})
        runs.append({"eta_y": eta_y, "eta_z": eta_z, "classes": per_class,
                     "_history": {"steps": res.steps.tolist(), "c": H.tolist()}})
    return {"experiment": "syn-small", "protocol": pr.as_dict(), "seeds": seeds, "seed": base, "steps": steps,
            "T": pr.T, "batch": pr.batch, "momentum": pr.momentum, "runs": runs, "runtime_s": round(time.perf_counter() - t0, 2)}


def syn_medium(args, *, protocol: SynProtocol = PROTOCOLS["syn-medium"]) -> dict:
    """Syn-Medium: for each number of query tokens and each ``(eta_Z, eta_Y/eta_Z)`` cell, mean and std over
    seeds of the entropy (nats) of the final ``c_n`` restricted to class ``n``'s distinct tokens, renormalized
    and averaged over ``n``.  A reduced run passes its own ``protocol``, and the JSON prints that one."""
    pr = protocol
    steps = pr.steps
    seeds = _int_arg(args, "seeds", 10, 1)
    base = _int_arg(args, "seed", 0, 0)
    grid = [(ez, round(ey / ez, 12)) for ey, ez in pr.rates]
    eta_z = np.array([ez for _, ez in pr.rates])
    eta_y = np.array([ey for ey, _ in pr.rates])
    t0 = time.perf_counter()
    cells = []
    for q in pr.queries:
        classes = pr.layout(q)
        ent = np.zeros((seeds, len(grid)))
        for s in range(seeds):
            res = train_sgd(classes, steps=steps, eta_y=eta_y, eta_z=eta_z, batch=pr.batch, T=pr.T,
                            momentum=pr.momentum, init_scale=pr.init_scale, seed=base + 1000 * q + s)
            for j in range(len(grid)):
                C = c_limit(res.Z[j], classes)
                ent[s, j] = np.mean([distinct_entropy(C[n], classes, n) for n in range(classes.K)])
        for j, (ez, r) in enumerate(grid):
            cells.append({"queries": q, "eta_z": ez, "ratio": r, "mean": round(float(ent[:, j].mean()), 5),
                          "std": round(float(ent[:, j].std()), 5)})
    return {"experiment": "syn-medium", "protocol": pr.as_dict(), "seeds": seeds, "seed": base, "steps": steps,
            "uniform_entropy": round(float(_uniform_entropy(pr)), 5), "cells": cells,
            "runtime_s": round(time.perf_counter() - t0, 2)}


def _uniform_entropy(pr: SynProtocol) -> float:
    p = np.linspace(*pr.distinct_range, pr.n_distinct)
    p = p / p.sum()
    return float(-(p * np.log(p)).sum())


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return buf.getvalue()


def syn_small_figure(result: dict) -> bytes:
    """Fig. 4 analogue: final attention per distinct token (by increasing probability) for each rate pair,
    and the distinct-token attention over training."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = result["runs"]
    fig, axes = plt.subplots(2, len(runs), figsize=(5 * len(runs), 6), squeeze=False)
    for j, run in enumerate(runs):
        ax = axes[0, j]
        for cl in run["classes"]:
            ax.plot(range(1, len(cl["distinct_attention"]) + 1), cl["distinct_attention"], "o-",
                    label=f"class {cl['class']} (common mass {cl['common_mass']:.2f})")
        ax.set_title(f"eta_Y={run['eta_y']:g}, eta_Z={run['eta_z']:g}: final c_n")
        ax.set_xlabel("distinct token (increasing P(l|n))")
        ax.set_ylabel("attention")
        ax.legend(fontsize=7)
        hist = run.get("_history")
        if hist:
            c = np.asarray(hist["c"])          # (steps, K, M)
            d = run["classes"][0]["distinct_tokens"]
            ax = axes[1, j]
            for i, tok in enumerate(d):
                ax.plot(hist["steps"], c[:, 0, tok], color=plt.cm.viridis(i / max(1, len(d) - 1)))
            ax.set_xscale("symlog")
            ax.set_xlabel("SGD step")
            ax.set_ylabel("c_{l|0} (distinct tokens of class 0)")
    return _png(fig)


def syn_medium_figure(result: dict) -> bytes:
    """Fig. 6 analogue: entropy of the distinct-token attention vs eta_Z, one line per eta_Y/eta_Z ratio,
    one panel per number of query tokens."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cells = result["cells"]
    qs = sorted({c["queries"] for c in cells})
    fig, axes = plt.subplots(1, len(qs), figsize=(4 * len(qs), 3.4), squeeze=False, sharey=True)
    for i, q in enumerate(qs):
        ax = axes[0, i]
        for r in sorted({c["ratio"] for c in cells}):
            pts = sorted((c["eta_z"], c["mean"], c["std"]) for c in cells if c["queries"] == q and c["ratio"] == r)
            x, m, s = map(np.array, zip(*pts))
            ax.errorbar(x, m, yerr=s, marker="o", capsize=2, label=f"eta_Y/eta_Z={r:g}")
        ax.set_title(f"{q} query token(s)")
        ax.set_xlabel("eta_Z")
        if i == 0:
            ax.set_ylabel("entropy of distinct attention (nats)")
        ax.legend(fontsize=7)
    return _png(fig)
