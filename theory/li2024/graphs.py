"""Token-priority graphs (docs/theory.md, "Token-priority graphs"; Li et al. 2024, Section 2).

``G^(k)`` has an edge ``y -> x`` for every token ``x != y`` of every sample whose query is ``k``.
``i ≍ j`` when i and j share a strongly connected component (SCC); ``i ⇒ j`` when an edge ``i -> j``
joins two different SCCs.  SCCs are ordered highest priority first (a topological order of the
condensation; ties broken by smallest token so the order is deterministic).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import combinations

import networkx as nx
import numpy as np

from theory.core.problem import Problem


@dataclass(frozen=True, eq=False)
class TPG:
    """The token-priority graph ``G^(k)`` of one query token ``k``."""

    query: int
    graph: nx.DiGraph

    @cached_property
    def sccs(self) -> list[list[int]]:
        """SCCs, highest priority first, each sorted."""
        cond = nx.condensation(self.graph)
        members = {c: sorted(cond.nodes[c]["members"]) for c in cond.nodes}
        order = nx.lexicographical_topological_sort(cond, key=lambda c: members[c][0])
        return [members[c] for c in order]

    @cached_property
    def component(self) -> dict[int, int]:
        """token -> index of its SCC in :attr:`sccs`."""
        return {t: c for c, comp in enumerate(self.sccs) for t in comp}

    @property
    def edges(self) -> list[tuple[int, int]]:
        return sorted(self.graph.edges)

    def equivalent(self) -> list[tuple[int, int]]:
        """All pairs ``(i ≍ j)``, i < j."""
        return [p for comp in self.sccs for p in combinations(comp, 2)]

    def dominates(self) -> list[tuple[int, int]]:
        """``(i ⇒ j)``: edges between different SCCs."""
        return [(i, j) for i, j in self.edges if self.component[i] != self.component[j]]

    def dominates_by_reachability(self) -> list[tuple[int, int]]:
        """``i ⇒* j``: SCC(i) reaches SCC(j) ≠ SCC(i) (same Graph-SVM feasible set, constraints add along paths)."""
        cond = nx.condensation(self.graph)
        mapping = cond.graph["mapping"]
        reach = {c: nx.descendants(cond, c) for c in cond.nodes}
        nodes = sorted(self.graph.nodes)
        return [(i, j) for i in nodes for j in nodes if mapping[j] in reach[mapping[i]]]

    def to_json(self) -> dict:
        return {"edges": [list(e) for e in self.edges], "sccs": self.sccs}


def token_priority_graphs(problem: Problem) -> dict[int, TPG]:
    """``{k: G^(k)}`` for every query token k of the problem."""
    graphs: dict[int, nx.DiGraph] = {}
    for seq, y in zip(problem.sequences, problem.labels):
        g = graphs.setdefault(seq[-1], nx.DiGraph())
        g.add_node(y)
        g.add_nodes_from(seq)
        g.add_edges_from((y, x) for x in set(seq) if x != y)
    return {k: TPG(k, graphs[k]) for k in sorted(graphs)}


def label_scc_mask(problem: Problem, graphs: dict[int, TPG] | None = None) -> np.ndarray:
    """n x K 0/1 mask of the tokens of each sample that lie in its label's SCC.

    Along ``W + R W^svm`` (R -> inf) every other token's attention vanishes, so the limit loss
    ``L̃`` is the loss on counts masked by this (docs/theory.md, "Finite component").
    """
    graphs = graphs or token_priority_graphs(problem)
    mask = np.zeros((problem.n, problem.K))
    for i, (seq, y) in enumerate(zip(problem.sequences, problem.labels)):
        comp = graphs[seq[-1]].component
        for t in seq:
            if comp[t] == comp[y]:
                mask[i, t] = 1.0
    return mask


def top_scc_tokens(tpg: TPG, context) -> list[int]:
    """The tokens of the highest-priority SCC of ``G^(k)`` present in ``context`` (hard retrieval).

    Tokens unknown to the graph have no priority relation; they are returned only if no known token
    is present.
    """
    present = set(context)
    known = [t for t in present if t in tpg.component]
    if not known:
        return sorted(present)
    best = min(tpg.component[t] for t in known)
    return sorted(t for t in known if tpg.component[t] == best)
