"""Planted violations the Li et al. 2024 claims are calibrated with: wrong targets a claim's criterion must reject.

* :func:`wrong_direction` -- a unit direction at a chosen angle from ``W^svm`` (Theorem 1's wrong targets);
* :func:`reversed_edge_svms` -- Graph-SVMs of the TPGs with one ``⇒`` edge reversed (Theorem 2's wrong direction);
* :func:`duplicated_sample_fins` -- ``W^fin`` of the problem with one cyclic sample duplicated (Theorem 2's
  wrong finite part).

Used by the calibration properties (``properties/li2024/test_theorem1.py``, ``test_theorem2.py``), the
suite's power tests (``properties/quality``) and ``check``'s planted-violation test.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

from theory.li2024.analysis import analyze
from theory.li2024.graphs import TPG
from theory.li2024.svm import SolverError, graph_svm


def wrong_direction(an, angle_deg, seed):
    """A unit direction at ``angle_deg`` from W^svm inside the span of the constraint matrices E^T (.) E."""
    rng = np.random.default_rng(seed)
    E = an.problem.E
    N = E.T @ rng.normal(size=(an.problem.K, an.problem.K)) @ E
    Wh = an.svm.W / an.svm.norm
    N -= np.sum(N * Wh) * Wh
    N /= np.linalg.norm(N)
    a = np.deg2rad(angle_deg)
    return np.cos(a) * Wh + np.sin(a) * N


def reversed_edge_svms(p, an):
    """Graph-SVMs of the TPGs with one ``⇒`` edge ``i -> j`` replaced by ``j -> i`` (a wrong priority)."""
    out = []
    for k, g in an.graphs.items():
        for i, j in g.dominates()[:3]:
            h = nx.DiGraph(g.graph)
            h.remove_edge(i, j)
            h.add_edge(j, i)
            graphs = dict(an.graphs)
            graphs[k] = TPG(k, h)
            try:
                W = graph_svm(p, graphs).W
            except SolverError:
                continue
            if np.linalg.norm(W) > 0:
                out.append(W)
    return out


def duplicated_sample_fins(p, an):
    """``W^fin`` of the problem with one cyclic sample duplicated: same TPGs (so same W^svm, S_fin), other weights."""
    out = []
    for i, (seq, y) in enumerate(zip(p.sequences, p.labels)):
        comp = an.graphs[seq[-1]].component
        if sum(comp[t] == comp[y] for t in set(seq)) < 2:
            continue  # the sample's label SCC holds one token: it does not enter L̃
        q = p.replace(sequences=list(p.sequences) + [seq] * 3, labels=list(p.labels) + [y] * 3)
        out.append(analyze(q).finite.W)
        if len(out) == 3:
            break
    return out
