"""Claims as objects: a theorem's statement, the assumptions it needs, its verdict and its calibrations.

One registry of claims (:mod:`theory.claims`) is applied to whatever problem a user brings, in the shape of
scikit-learn's estimator checks: ``python -m theory check FILE`` runs every claim whose assumptions the
problem meets, and names the first assumption that fails for the others.  The verdict of a claim is the one
its paper's package decides (:mod:`theory.core.decision`: holds, fails, undecided) plus
:attr:`~theory.core.decision.Outcome.NOT_APPLICABLE` when an assumption fails.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from theory.core.decision import Outcome, Verdict

__all__ = ["Assumption", "Claim", "Domain"]


@dataclass(frozen=True)
class Assumption:
    """A hypothesis of a claim, as data: its name, its statement, and a check on a problem.

    A *numerical* assumption (``C E^T = I``, linear independence) is decided against a tolerance; its
    ``residual(problem)`` returns ``(measured, tolerance)`` so that "not applicable" can say by how much the
    problem misses it, and ``remedy`` says how to write a file that meets it exactly.

    Parameters
    ----------
    name : str
        Short, shown in verdicts and the catalogue (``"Assumption 1 (head)"``).
    statement : str
        One sentence of what it asks.
    check : callable
        ``check(problem) -> bool``, True when the problem meets it.
    residual : callable, optional
        ``residual(problem) -> (measured, tolerance)`` for a numerical assumption.
    remedy : str, optional
        How to write a problem file that meets it.

    Examples
    --------
    >>> from theory.core.problem import Problem
    >>> log = Assumption("log loss", "the loss is -log u", lambda p: p.loss == "log")
    >>> p = Problem.load("examples/scc_above_token.json")
    >>> log.check(p), log.check(p.replace(loss="exp"))
    (True, False)
    >>> log.explain(p.replace(loss="exp"))[0]
    'assumption not met: log loss (the loss is -log u)'
    """

    name: str
    statement: str
    check: Callable[[object], bool] = field(repr=False, compare=False)
    residual: Callable[[object], tuple[float, float]] | None = field(default=None, repr=False, compare=False)
    remedy: str = ""

    def explain(self, problem) -> tuple[str, dict]:
        """Why a problem does not meet this assumption.

        Returns
        -------
        reason : str
            One line naming the assumption (and, for a numerical one, the residual and the remedy).
        measures : dict
            ``assumption`` and, for a numerical one, ``residual`` and ``tolerance``.
        """
        text, measures = f"assumption not met: {self.name} ({self.statement})", {"assumption": self.name}
        if self.residual is not None:
            measured, tol = self.residual(problem)
            measures.update(residual=float(measured), tolerance=float(tol))
            text += f"; measured {measured:.3g} against the tolerance {tol:.3g}"
        if self.remedy:
            text += f"; {self.remedy}"
        return text, measures


@dataclass(frozen=True)
class Domain:
    """What a claim's statement allows a problem file to be, as data: the losses and head kinds it covers
    (``"biorthogonal"``: ``C E^T = I``; ``"broken"``: any other head) and the (loss, head) pairs it excludes.
    :func:`strategies.domains.problems_for` draws exactly this set, so a claim's properties cannot cover
    less than its statement without a test noticing (``properties/suite/test_domains.py``).  Empty for a
    claim judged on its own experiments rather than on problem files."""

    losses: tuple[str, ...] = ()
    heads: tuple[str, ...] = ()
    exclude: tuple[tuple[str, str], ...] = ()

    def pairs(self) -> tuple[tuple[str, str], ...]:
        """The (loss, head) pairs of the domain: every loss with every head kind, less ``exclude``."""
        return tuple((loss, h) for loss in self.losses for h in self.heads if (loss, h) not in self.exclude)


@dataclass(frozen=True)
class Claim:
    """One claim the suite checks.

    ``judge(problem, budget_scale)`` returns the claim's :class:`~theory.core.decision.Verdict` on a problem
    that meets every assumption; ``calibrations`` name the planted violations it must reject, ``properties``
    the tests that check it (paths under ``properties/``).  Claims of other packages join the registry
    through an entry point (:mod:`theory.claims`, docs/adding-claims.md).

    Parameters
    ----------
    name : str
        ``paper.claim`` (``li2024.theorem1``); the part before the dot groups the report's dashboard.
    paper : str
        Authors (year), title.
    reference : str
        Where in the paper (``"Theorem 1"``).
    statement : str
        What the claim says, in a sentence or two.
    assumptions : tuple of Assumption
        Checked in order; the first that fails makes the verdict *not applicable*.
    rule : str
        The verdict rule, in words (shown in the catalogue and the report).
    calibrations : tuple of str
        The planted violations its judge must reject.
    properties : tuple of str
        The test files that check it (the report's dashboard counts their tests on the claim's card).
    judge : callable, optional
        ``judge(problem, budget_scale) -> Verdict``; None for a claim judged on its own experiments.
    domain : theory.core.claims.Domain
        The losses and heads its statement allows (what its properties must draw).
    scales_budget : bool, default True
        Whether ``budget_scale`` moves the judge's maximum budget.  False for a judge whose budgets are its
        criterion's own (Li et al.'s Theorem 2: the path's margins; Tian et al.'s Theorem 4: 300 and 3000
        ``t₀``): ``tpg check`` then does not suggest ``--budget-scale`` for its undecided verdicts.

    Examples
    --------
    >>> from theory.claims import claim
    >>> from theory.core.problem import Problem
    >>> c = claim("li2024.automaton")
    >>> [a.name for a in c.assumptions][:2]
    ['log loss', 'Assumption 1 (head)']
    >>> c.check(Problem.load("examples/section5_counterexample.json")).outcome.value
    'not applicable'
    """

    name: str
    paper: str
    reference: str
    statement: str
    assumptions: tuple[Assumption, ...]
    rule: str
    calibrations: tuple[str, ...]
    properties: tuple[str, ...]
    judge: Callable[[object, float], Verdict] | None = field(default=None, repr=False, compare=False)
    domain: Domain = field(default_factory=Domain, compare=False)
    scales_budget: bool = field(default=True, compare=False)

    def first_failing_assumption(self, problem) -> Assumption | None:
        """The first of :attr:`assumptions` that ``problem`` does not meet, or None."""
        for a in self.assumptions:
            if not a.check(problem):
                return a
        return None

    def check(self, problem, budget_scale: float = 1.0, progress=None) -> Verdict:
        """The claim's verdict on ``problem``.

        Parameters
        ----------
        problem : Problem
            The problem to judge (:class:`theory.core.problem.Problem`).
        budget_scale : float, default 1.0
            Multiplies the judge's maximum budget (``tpg check --budget-scale``).
        progress : callable, optional
            Passed to judges that report progress.

        Returns
        -------
        Verdict
            NOT_APPLICABLE naming the first assumption that fails, else the judge's verdict with its
            ``seconds``.
        """
        failing = self.first_failing_assumption(problem)
        if failing is not None:
            why, measures = failing.explain(problem)
            return Verdict(Outcome.NOT_APPLICABLE, measures, reason_text=why)
        if self.judge is None:
            return Verdict(Outcome.NOT_APPLICABLE, {}, reason_text="this claim is checked on its own experiments, "
                                                                   "not on a problem file")
        start = time.perf_counter()
        v = self.judge(problem, budget_scale) if progress is None else self.judge(problem, budget_scale, progress)
        v.seconds = time.perf_counter() - start
        return v

    def describe(self) -> dict:
        """JSON-ready description: everything but the judge (the report's dashboard reads it).

        Returns
        -------
        dict
            ``name``, ``paper``, ``reference``, ``statement``, ``assumptions`` (name and statement each),
            ``rule``, ``calibrations``, ``properties``.
        """
        return {"name": self.name, "paper": self.paper, "reference": self.reference, "statement": self.statement,
                "assumptions": [{"name": a.name, "statement": a.statement} for a in self.assumptions],
                "rule": self.rule, "calibrations": list(self.calibrations), "properties": list(self.properties),
                "domain": [list(pair) for pair in self.domain.pairs()]}
