"""Pseudo token-priority graphs (Li et al. 2024, Section 5; THEORY.md "Local convergence").

When the head or the loss breaks the assumptions, GD converges only locally, toward the Graph-SVM of a
*pseudo*-TPG built from the tokens GD actually selects: in each sample, the tokens whose attention
mass is at least ``SELECT`` are *selected*, those at most ``REJECT`` are not, and the ones in between are
ambiguous and left out of that sample.  Edges go from every selected token to every other (non-ambiguous)
token of the sample, so the selected tokens form an SCC above the rest.
"""
from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from theory.graphs import TPG
from theory.losses import sample_attention
from theory.problem import Problem
from theory.svm import SVMSolution, graph_svm

SELECT, REJECT = 0.1, 0.01


@dataclass(frozen=True)
class PseudoSVM:
    graphs: dict
    svm: SVMSolution
    ambiguous: int  # (sample, token) pairs left out


def pseudo_tpgs(problem: Problem, W: np.ndarray, select: float = SELECT, reject: float = REJECT):
    """``({k: pseudo G^(k)}, number of ambiguous (sample, token) pairs)``."""
    if not 0 < reject < select <= 1:
        raise ValueError(f"pseudo-TPG thresholds: need 0 < reject < select <= 1, got {reject}, {select}")
    a = sample_attention(problem.E @ W @ problem.E.T, problem)
    graphs: dict[int, nx.DiGraph] = {}
    ambiguous = 0
    for i, seq in enumerate(problem.sequences):
        g = graphs.setdefault(seq[-1], nx.DiGraph())
        tokens = sorted(set(seq))
        chosen = [t for t in tokens if a[i, t] >= select]
        kept = [t for t in tokens if a[i, t] >= select or a[i, t] <= reject]
        ambiguous += len(tokens) - len(kept)
        g.add_nodes_from(kept)
        g.add_edges_from((s, t) for s in chosen for t in kept if t != s)
    return {k: TPG(k, graphs[k]) for k in sorted(graphs)}, ambiguous


def pseudo_svm(problem: Problem, W: np.ndarray, select: float = SELECT, reject: float = REJECT,
               name: str = "problem") -> PseudoSVM:
    graphs, amb = pseudo_tpgs(problem, W, select, reject)
    return PseudoSVM(graphs, graph_svm(problem, graphs, name=f"pseudo-TPG of {name}"), amb)
