"""Everything the theory predicts about one problem: graphs, ``W^svm``, ``S_fin``, ``W^fin``.

This is what ``python -m theory analyze`` prints; every number in it has been certified by the
function that computed it (see :mod:`theory.li2024.svm` and :mod:`theory.li2024.finite`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.li2024.finite import FiniteSolution, NoFiniteMinimizer, finite_component
from theory.li2024.graphs import TPG, token_priority_graphs
from theory.core.problem import Problem
from theory.li2024.subspace import CyclicSubspace, cyclic_subspace
from theory.li2024.svm import SVMSolution, graph_svm

__all__ = ["Analysis", "analyze"]


@dataclass(frozen=True, eq=False)
class Analysis:
    """What the theory predicts about one problem (:func:`analyze`).

    Attributes
    ----------
    problem : Problem
        The problem analysed.
    graphs : dict of int to TPG
        The token-priority graph ``G^(k)`` of each query ``k`` (its SCCs in priority order).
    svm : SVMSolution
        The certified ``W^svm``.
    space : CyclicSubspace
        The cyclic subspace ``S_fin``.
    finite : FiniteSolution or None
        The certified ``W^fin``; None when not asked for or when it does not exist.
    finite_absent : str or None
        Why ``L̃`` has no finite minimizer, when it has none.
    """

    problem: Problem
    graphs: dict[int, TPG]
    svm: SVMSolution
    space: CyclicSubspace
    finite: FiniteSolution | None  # None when W^fin was not asked for, or does not exist (finite_absent)
    finite_absent: str | None = None  # why L̃ has no finite minimizer (theory.li2024.finite.NoFiniteMinimizer)

    @property
    def svm_direction(self) -> np.ndarray:
        """``W^svm / ||W^svm||`` (zero when ``W^svm = 0``): the direction Theorem 1 says GD converges to."""
        n = self.svm.norm
        return self.svm.W / n if n > 0 else self.svm.W

    @property
    def n_sccs(self) -> int:
        """The number of strongly connected components over all graphs."""
        return sum(len(g.sccs) for g in self.graphs.values())

    @property
    def cyclic(self) -> bool:
        """Whether some graph has an SCC of more than one token (then ``S_fin`` is not ``{0}``)."""
        return any(len(c) > 1 for g in self.graphs.values() for c in g.sccs)

    def to_json(self) -> dict:
        """What ``tpg analyze`` prints: sizes, assumptions, graphs, ``W^svm`` and ``W^fin`` with their certificates."""
        p = self.problem
        from theory.li2024.losses import log_loss_defined

        assumptions = {**p.assumptions(), "loss_finite_at_zero": p.loss != "log" or log_loss_defined(p)}
        out = {"vocab_size": p.K, "dim": p.d, "samples": p.n, "assumptions": assumptions,
               "graphs": {str(k): g.to_json() for k, g in self.graphs.items()},
               "certificate": self.svm.certificate.get("certificate", "float"),
               "svm": {"W": self.svm.W.tolist(), "norm": self.svm.norm,
                       "certificate": {k: v for k, v in self.svm.certificate.items() if k != "certificate"}},
               "cyclic_subspace": {"dim": self.space.dim}}
        if self.finite_absent is not None:
            out["finite"] = {"exists": False, "reason": self.finite_absent}
        if self.finite is not None:
            f = self.finite
            out["finite"] = {"W": f.W.tolist(), "grad_norm": f.grad_norm}
            if f.error_bound is not None:
                out["finite"].update(error_bound=f.error_bound, grad_norm_extended=f.grad_norm_extended,
                                     min_curvature=f.min_curvature)
        return out


def analyze(problem: Problem, name: str = "problem", finite: bool = True, bound: bool = False) -> Analysis:
    """Graphs, certified ``W^svm`` (exactly), ``S_fin`` and certified ``W^fin`` of a problem.

    ``W^fin`` is the minimizer of the limit objective ``L̃`` of the problem's own loss (docs/theory.md,
    "Graph-SVM, cyclic subspace, finite component"): it belongs to the loss, so there is no way to ask for
    another loss's here.  To compare with another loss's target, analyze ``problem.replace(loss=...)``.

    Parameters
    ----------
    problem : Problem
        The problem (:class:`theory.core.problem.Problem`).
    name : str, default "problem"
        Named in error messages.
    finite : bool, default True
        Compute ``W^fin`` (a Newton solve); False leaves ``Analysis.finite`` None.
    bound : bool, default False
        Add ``W^fin``'s a-posteriori error bound (gradient at 40 digits; what ``tpg analyze`` prints).

    Returns
    -------
    Analysis
        ``finite`` is None with ``finite_absent`` saying why when ``L̃`` has no finite minimizer.

    Raises
    ------
    theory.li2024.svm.SolverError
        When a computed answer fails its certificate (:class:`~theory.li2024.svm.GraphSVMInfeasible` when
        the Graph-SVM has no solution).

    Examples
    --------
    >>> from theory.core.problem import Problem
    >>> an = analyze(Problem.load("examples/scc_above_token.json"))
    >>> an.n_sccs, an.cyclic, an.space.dim, an.svm.certificate["certificate"]
    (3, True, 1, 'exact')
    """
    graphs = token_priority_graphs(problem)
    svm = graph_svm(problem, graphs, name=name)
    space = cyclic_subspace(problem, graphs)
    try:
        fin = finite_component(problem, graphs, space, name=name, bound=bound) if finite else None
    except NoFiniteMinimizer as exc:  # an answer, not a failure: W^fin does not exist for this head and loss
        return Analysis(problem, graphs, svm, space, None, str(exc))
    return Analysis(problem, graphs, svm, space, fin)
