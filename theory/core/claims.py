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

__all__ = ["Assumption", "Claim"]


@dataclass(frozen=True)
class Assumption:
    """A hypothesis of a claim, as data: its name, its statement, and a check on a problem (True when it holds).

    A *numerical* assumption (``C E^T = I``, linear independence) is decided against a tolerance; its
    ``residual(problem)`` returns ``(measured, tolerance)`` so that "not applicable" can say by how much the
    problem misses it, and ``remedy`` says how to write a file that meets it exactly."""

    name: str
    statement: str
    check: Callable[[object], bool] = field(repr=False, compare=False)
    residual: Callable[[object], tuple[float, float]] | None = field(default=None, repr=False, compare=False)
    remedy: str = ""

    def explain(self, problem) -> tuple[str, dict]:
        """``(reason, measures)`` for a problem that does not meet this assumption."""
        text, measures = f"assumption not met: {self.name} ({self.statement})", {"assumption": self.name}
        if self.residual is not None:
            measured, tol = self.residual(problem)
            measures.update(residual=float(measured), tolerance=float(tol))
            text += f"; measured {measured:.3g} against the tolerance {tol:.3g}"
        if self.remedy:
            text += f"; {self.remedy}"
        return text, measures


@dataclass(frozen=True)
class Claim:
    """One claim the suite checks.

    ``judge(problem, budget_scale)`` returns the claim's :class:`~theory.core.decision.Verdict` on a problem
    that meets every assumption; ``calibrations`` name the planted violations it must reject, ``properties``
    the tests that check it (paths under ``properties/``)."""

    name: str
    paper: str
    reference: str
    statement: str
    assumptions: tuple[Assumption, ...]
    rule: str
    calibrations: tuple[str, ...]
    properties: tuple[str, ...]
    judge: Callable[[object, float], Verdict] | None = field(default=None, repr=False, compare=False)

    def first_failing_assumption(self, problem) -> Assumption | None:
        for a in self.assumptions:
            if not a.check(problem):
                return a
        return None

    def check(self, problem, budget_scale: float = 1.0, progress=None) -> Verdict:
        """The claim's verdict on ``problem``, NOT_APPLICABLE naming the first assumption that fails."""
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
        """JSON-ready description (the claims catalogue of the docs is generated from it)."""
        return {"name": self.name, "paper": self.paper, "reference": self.reference, "statement": self.statement,
                "assumptions": [{"name": a.name, "statement": a.statement} for a in self.assumptions],
                "rule": self.rule, "calibrations": list(self.calibrations), "properties": list(self.properties)}
