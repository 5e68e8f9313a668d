"""Pseudo token-priority graphs (Li et al. 2024, Section 5; docs/theory.md, "The claims").

When the head or the loss breaks the assumptions, GD converges only locally, toward the Graph-SVM of a
*pseudo*-TPG built from the tokens GD actually selects.  The rule of the authors' notebook for that
figure: in each sample a token is *selected* when its attention mass (copies pooled) is ``> SELECT``
(1e-2), *ambiguous* when it lies in ``(REJECT, SELECT]`` = (0.009, 0.01], and *not selected* at
``<= REJECT``.  Ambiguous tokens are left out of that sample's part of the graph; edges go from every
selected token to every other non-ambiguous token of the sample, so the selected tokens of a sample form
one SCC above the rest.

(The notebook leaves ambiguous tokens out of the graph's edges but still gives them Graph-SVM
constraints against the selected tokens; here they are left out of both, as the Section 5 text says.
The band is 0.001 wide, so the difference shows only when a token's mass falls inside it.)
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import networkx as nx
import numpy as np

from theory.li2024.graphs import TPG
from theory.li2024.losses import sample_attention
from theory.core.problem import Problem
from theory.li2024.svm import SVMSolution, graph_svm

SELECT, REJECT = 1e-2, 1e-2 - 1e-3


def _check(select: float, reject: float) -> None:
    if not 0 < reject < select <= 1:
        raise ValueError(f"pseudo-TPG thresholds: need 0 < reject < select <= 1, got {reject}, {select}")


def classify(mass: dict, select: float = SELECT, reject: float = REJECT) -> tuple[list[int], list[int]]:
    """``(selected, ambiguous)`` tokens (sorted) of one sample from its attention mass per token:
    selected at ``mass > select``, ambiguous at ``reject < mass <= select``, otherwise not selected."""
    _check(select, reject)
    chosen = sorted(t for t, m in mass.items() if m > select)
    ambiguous = sorted(t for t, m in mass.items() if reject < m <= select)
    return chosen, ambiguous


@dataclass(frozen=True)
class Selection:
    """What GD selects in each sample: ``selected[i]`` and ``ambiguous[i]`` (sorted token lists)."""

    selected: tuple
    ambiguous: tuple

    @property
    def n_ambiguous(self) -> int:
        return sum(len(a) for a in self.ambiguous)


def selection(problem: Problem, W: np.ndarray, select: float = SELECT, reject: float = REJECT) -> Selection:
    """The selected and ambiguous tokens of every sample under ``W``."""
    a = sample_attention(problem.E @ W @ problem.E.T, problem)
    sel, amb = [], []
    for i, seq in enumerate(problem.sequences):
        c, m = classify({t: float(a[i, t]) for t in sorted(set(seq))}, select, reject)
        sel.append(tuple(c))
        amb.append(tuple(m))
    return Selection(tuple(sel), tuple(amb))


def graphs_of(problem: Problem, sel: Selection) -> dict:
    """``{k: pseudo G^(k)}`` of a selection: edges from each selected token of a sample to every other
    non-ambiguous token of it."""
    graphs: dict[int, nx.DiGraph] = {}
    for seq, chosen, amb in zip(problem.sequences, sel.selected, sel.ambiguous):
        g = graphs.setdefault(seq[-1], nx.DiGraph())
        kept = [t for t in sorted(set(seq)) if t not in amb]
        g.add_nodes_from(kept)
        g.add_edges_from((s, t) for s in chosen for t in kept if t != s)
    return {k: TPG(k, graphs[k]) for k in sorted(graphs)}


def pseudo_tpgs(problem: Problem, W: np.ndarray, select: float = SELECT, reject: float = REJECT):
    """``({k: pseudo G^(k)}, number of ambiguous (sample, token) pairs)``."""
    sel = selection(problem, W, select, reject)
    return graphs_of(problem, sel), sel.n_ambiguous


def selected_scc_mask(problem: Problem, graphs: dict, sel: Selection) -> np.ndarray:
    """n x K mask of each sample's tokens in the pseudo-SCC of its selected tokens (one SCC: they point at
    each other).  Along ``W + R W^svm_pseudo`` (R -> inf) every other token's attention vanishes, so this
    is the pseudo-TPG's ``L̃``.  A sample with nothing selected keeps nothing."""
    mask = np.zeros((problem.n, problem.K))
    for i, (seq, chosen) in enumerate(zip(problem.sequences, sel.selected)):
        if not chosen:
            continue
        comp = graphs[seq[-1]].component
        top = comp[chosen[0]]
        for t in set(seq):
            if comp.get(t) == top:
                mask[i, t] = 1.0
    return mask


def label_scc_mask(problem: Problem, graphs: dict) -> np.ndarray:
    """n x K mask of each sample's tokens in its *label's* SCC of ``graphs`` (the authors' reduced dataset,
    also for the pseudo-TPG; a label absent from the graph keeps nothing)."""
    mask = np.zeros((problem.n, problem.K))
    for i, (seq, y) in enumerate(zip(problem.sequences, problem.labels)):
        comp = graphs[seq[-1]].component
        if y not in comp:
            continue
        for t in set(seq):
            if comp.get(t) == comp[y]:
                mask[i, t] = 1.0
    return mask


@dataclass(frozen=True)
class PseudoSVM:
    graphs: dict
    svm: SVMSolution
    ambiguous: int  # (sample, token) pairs left out
    selection: Selection | None = None


# The pseudo-TPG's Graph-SVM is a function of the embeddings, the sequences and the selection alone
# (graphs_of), and a verdict asks for it at every budget of its ladder and every pass over it, mostly for the
# same selection: ci's two Section 5 properties asked 408 times for 48 distinct ones (2.7 s of 18 s).  Solved
# once per distinct key; the certificate was checked when it was solved, and the cached arrays are read-only.
_SVM_CACHE: OrderedDict = OrderedDict()
_SVM_CACHE_SIZE = 256


def _pseudo_graph_svm(problem: Problem, sel: Selection, graphs: dict, name: str) -> SVMSolution:
    E = np.ascontiguousarray(problem.E, dtype=float)
    key = (E.shape, E.tobytes(), tuple(map(tuple, problem.sequences)), sel)
    sol = _SVM_CACHE.get(key)
    if sol is None:
        sol = graph_svm(problem, graphs, name=name)
        for a in (sol.W, sol.margins, sol.duals):
            a.flags.writeable = False
        _SVM_CACHE[key] = sol
        if len(_SVM_CACHE) > _SVM_CACHE_SIZE:
            _SVM_CACHE.popitem(last=False)
    else:
        _SVM_CACHE.move_to_end(key)
    return sol


def pseudo_svm(problem: Problem, W: np.ndarray, select: float = SELECT, reject: float = REJECT,
               name: str = "problem") -> PseudoSVM:
    """The pseudo-TPG of ``W`` under ``(select, reject)`` and its certified Graph-SVM (solved once per distinct
    selection of a problem: :data:`_SVM_CACHE`)."""
    sel = selection(problem, W, select, reject)
    graphs = graphs_of(problem, sel)
    return PseudoSVM(graphs, _pseudo_graph_svm(problem, sel, graphs, f"pseudo-TPG of {name}"), sel.n_ambiguous, sel)
