"""Three-valued sequential decisions for claims about ``τ -> ∞`` judged on a finite budget.

An asymptotic claim ("the direction converges", "the finite part converges", "the leak vanishes") can be
watched only on a finite run.  A single threshold on a finite-budget statistic has two kinds of error,
and the one that matters most for a verification suite is the false alarm: a valid run whose transient
lasts one decade longer than the threshold's calibration assumed.  Every asymptotic verdict of the suite
is therefore decided by one procedure:

1. **Two zones per statistic, with room between them.**  Each statistic ``s`` of a claim has an *accept*
   zone (where the worst valid runs measured lie, with their drift at this budget) and a *reject* zone
   (where a violation's growth puts it); the *indifference zone* between them is the margin.  The zones
   and the rates that place them are written, with their derivation, in the docstring of the claim's
   criterion (for Theorem 1: :mod:`theory.li2024.criteria`).
2. **Fails only when confirmed.**  A statistic in its reject zone is *evidence*; the verdict fails only
   when the same statistic is in its reject zone at two consecutive budgets (``ESCALATION`` x apart), so a
   run is never failed because one budget ended near a threshold.  Trend statistics (the ratio of a
   statistic at two budgets) exist only from the second budget on, and count as confirmed evidence there.
3. **Escalate in between.**  A verdict that is neither accepted (every statistic in its accept zone) nor
   confirmed-failed is re-judged at ``ESCALATION`` x the budget, resuming the run from where it stopped
   (``extend``), up to the claim's maximum budget.
4. **Undecided at the maximum budget.**  Still between there, the outcome is :attr:`Outcome.UNDECIDED`:
   counted (a property reports it as not judged, with its own reason, subject to the judged-share floor),
   shown in the report, never a failure.

:class:`Outcome` also has ``NOT_APPLICABLE``, for a claim whose assumptions a problem does not meet (see
:mod:`theory.core.claims`), and ``ERROR``, for a claim whose computation failed its certificate (``check``
prints it and exits 3).
"""
from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["ACCEPT", "BETWEEN", "ESCALATION", "REJECT", "Outcome", "Statistic", "Verdict", "budget_ladder", "combine",
           "sequential", "zone"]

# Consecutive budgets differ by this factor: one decade, the unit in which the theorems' rates are stated.
ESCALATION = 10


class Outcome(str, enum.Enum):
    """A claim's outcome on one problem (its ``value`` is what ``tpg check`` prints as ``verdict``).

    Examples
    --------
    >>> Outcome("undecided") is Outcome.UNDECIDED, Outcome.HOLDS.value
    (True, 'holds')
    """

    HOLDS = "holds"
    FAILS = "fails"
    UNDECIDED = "undecided"
    NOT_APPLICABLE = "not applicable"
    # A numerical answer failed its certificate on a problem inside the claim's domain: no verdict.
    ERROR = "error"


#: The zones of a :class:`Statistic`: its accept zone, the indifference zone between, its reject zone.
ACCEPT, BETWEEN, REJECT = "accept", "between", "reject"


@dataclass(frozen=True)
class Statistic:
    """One statistic judged at one budget: its value, which zone it is in, and why.

    Parameters
    ----------
    name : str
        The same name at every budget (:func:`combine` confirms a reject by it).
    value : float
    zone : str
        :data:`ACCEPT`, :data:`BETWEEN` or :data:`REJECT` (see :func:`zone`).
    why : str
        One phrase, shown as the verdict's reason when the statistic rejects or is pending.
    trend : bool, default False
        The statistic compares two budgets, so a reject is already confirmed evidence.
    """

    name: str
    value: float
    zone: str  # ACCEPT, BETWEEN or REJECT
    why: str = ""
    trend: bool = False


@dataclass
class Verdict:
    """A claim's decision on one run: outcome, reason, every measure, and the budget it took.

    Parameters
    ----------
    outcome : Outcome
    measures : dict
        Every number the judge measured (JSON-ready through :meth:`as_dict`).
    statistics : list of Statistic
        The last budget's.
    budget : int
        The last budget (steps, or the claim's unit).
    history : list of tuple
        ``(budget, outcome at that budget)`` pairs, ``"escalate"`` for a budget that led to the next.
    seconds : float
        Wall time (set by :meth:`theory.core.claims.Claim.check`).
    reason_text : str
        Overrides the reason built from the statistics.
    trail : list of dict
        The measures at every budget, first to last.

    Examples
    --------
    >>> v = Verdict(Outcome.FAILS, {"rise": 0.1}, [Statistic("rise", 0.1, REJECT, "the loss rose")])
    >>> v.passed, v.reason, v.as_dict()["verdict"]
    (False, 'the loss rose', 'fails')
    """

    outcome: Outcome
    measures: dict
    statistics: list[Statistic] = field(default_factory=list)
    budget: int = 0
    history: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0
    reason_text: str = ""
    trail: list[dict] = field(default_factory=list)  # the measures at every budget, first to last

    @property
    def passed(self) -> bool:
        """Whether the outcome is HOLDS."""
        return self.outcome is Outcome.HOLDS

    @property
    def failures(self) -> list[str]:
        """The ``why`` of each statistic in its reject zone."""
        return [s.why for s in self.statistics if s.zone == REJECT]

    @property
    def pending(self) -> list[str]:
        """The ``why`` of each statistic between the zones."""
        return [s.why for s in self.statistics if s.zone == BETWEEN]

    @property
    def reason(self) -> str:
        """The verdict in one line (``reason_text`` when given, else built from the outcome and the statistics)."""
        if self.reason_text:
            return self.reason_text
        if self.outcome is Outcome.HOLDS:
            return "every statistic in its accept zone"
        if self.outcome is Outcome.FAILS:
            return "; ".join(self.failures) or "rejected"
        if self.outcome is Outcome.UNDECIDED:
            return "at the maximum budget still between the zones: " + "; ".join(self.pending + self.failures)
        return self.reason_text or "not applicable"

    def as_dict(self) -> dict:
        """JSON-ready: outcome, reason, measures (floats), budget, history, seconds."""
        def clean(v):
            if isinstance(v, (bool, int, str)) or v is None:
                return v
            try:
                return float(v)
            except (TypeError, ValueError):
                return str(v)

        return {"verdict": self.outcome.value, "reason": self.reason, "budget": self.budget,
                "history": [[b, o] for b, o in self.history], "seconds": round(self.seconds, 3),
                "statistics": {s.name: {"value": clean(s.value), "zone": s.zone} for s in self.statistics},
                "measures": {k: clean(v) for k, v in self.measures.items()}}

    def __str__(self):
        m = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.measures.items())
        head = {Outcome.HOLDS: "HOLDS", Outcome.FAILS: "FAILS: ", Outcome.UNDECIDED: "UNDECIDED: ",
                Outcome.NOT_APPLICABLE: "NOT APPLICABLE: "}[self.outcome]
        body = "" if self.outcome is Outcome.HOLDS else self.reason
        steps = " -> ".join(f"{b}:{o}" for b, o in self.history)
        return f"{head}{body}  [budgets {steps}] [{m}]"


def zone(value: float, accept: Callable[[float], bool], reject: Callable[[float], bool]) -> str:
    """The zone a value is in.

    Parameters
    ----------
    value : float
    accept, reject : callable
        Predicates on the value: its accept zone and its reject zone.

    Returns
    -------
    str
        :data:`ACCEPT` when ``accept(value)``, :data:`REJECT` when ``reject(value)``, :data:`BETWEEN`
        otherwise (accept wins: the zones are disjoint by construction, and a NaN lands BETWEEN).

    Examples
    --------
    >>> [zone(x, lambda v: v < 1, lambda v: v > 2) for x in (0.5, 1.5, 3.0, float("nan"))]
    ['accept', 'between', 'reject', 'between']
    """
    if accept(value):
        return ACCEPT
    if reject(value):
        return REJECT
    return BETWEEN


def combine(statistics: Sequence[Statistic], earlier: Verdict | None) -> Outcome:
    """The decision at one budget, from that budget's statistics and the verdict one budget before.

    Parameters
    ----------
    statistics : sequence of Statistic
        This budget's.
    earlier : Verdict or None
        The verdict one budget before (None at the first budget).

    Returns
    -------
    Outcome
        HOLDS when every statistic accepts; FAILS when a statistic rejects and the rejection is confirmed
        (a trend statistic, or the same statistic rejected at the budget before); else UNDECIDED (the
        caller escalates unless at its last budget).

    Examples
    --------
    >>> bad = Statistic("rise", 0.1, REJECT)
    >>> combine([bad], None), combine([bad], Verdict(Outcome.UNDECIDED, {}, [bad]))
    (<Outcome.UNDECIDED: 'undecided'>, <Outcome.FAILS: 'fails'>)
    """
    if all(s.zone == ACCEPT for s in statistics):
        return Outcome.HOLDS
    before = {s.name for s in (earlier.statistics if earlier is not None else []) if s.zone == REJECT}
    if any(s.zone == REJECT and (s.trend or s.name in before) for s in statistics):
        return Outcome.FAILS
    return Outcome.UNDECIDED


def budget_ladder(first: int, maximum: int) -> list[int]:
    """The budgets of an escalation: ``first, 10 first, 100 first, ...`` up to the one nearest ``maximum``.

    Parameters
    ----------
    first : int
        The first budget.
    maximum : int
        The claim's maximum budget (times ``budget_scale``).

    Returns
    -------
    list of int
        At least ``[first]``; the last is within a factor ``sqrt(ESCALATION)`` of ``maximum`` on a log
        scale.

    Examples
    --------
    >>> budget_ladder(100, 10_000), budget_ladder(100, 25_000), budget_ladder(100, 50)
    ([100, 1000, 10000], [100, 1000, 10000], [100])

    Notes
    -----

    Nearest, not "at most": a claim's power must not depend on where inside a decade its first budget
    falls.  With "at most", a first budget of 1.02e5 under a maximum of 1e7 stopped at 1.02e6, one
    escalation short of a first budget of 1.00e5, and a violation visible from the second budget on could
    only be confirmed at a third: the deep run (seed 2734502900) left a W^fin planted 0.2 off undecided
    (its error 0.2025, 0.2002 at 1.02e5, 1.02e6 steps; the first budget still in the window of the run's
    own transient) which the third budget, 1.02e7, rejects (0.2000, confirmed)."""
    decades = max(0, int(math.floor(math.log(maximum / first, ESCALATION) + 0.5))) if maximum > first else 0
    return [int(first) * ESCALATION**k for k in range(decades + 1)]


def sequential(judge: Callable[[object, Verdict | None], list[Statistic] | tuple[list[Statistic], dict]],
               budgets: Sequence[int], run: object, extend: Callable[[object, int], object]
               ) -> tuple[Verdict, object]:
    """Decide a claim on ``run`` (trained for ``budgets[0]``), escalating through ``budgets``.

    Parameters
    ----------
    judge : callable
        ``judge(run, earlier) -> (statistics, measures)`` for the run at its budget (``earlier``: the
        verdict one budget before, or None).
    budgets : sequence of int
        Non-empty, increasing (:func:`budget_ladder`).
    run : object
        The run at ``budgets[0]`` (e.g. a :class:`theory.li2024.training.Trajectory`).
    extend : callable
        ``extend(run, steps)``: the same run continued to ``steps`` (resumed, not restarted).

    Returns
    -------
    verdict : Verdict
        The final verdict, with its ``history`` and ``trail``.
    run : object
        The run it judged last.

    Examples
    --------
    A statistic that stays in its reject zone fails at the second budget:

    >>> judge = lambda run, earlier: ([Statistic("x", run, REJECT, "x too large")], {"x": run})
    >>> v, _ = sequential(judge, [10, 100, 1000], 10, lambda run, steps: steps)
    >>> v.outcome.value, v.history
    ('fails', [(10, 'escalate'), (100, 'fails')])
    """
    start = time.perf_counter()
    earlier: Verdict | None = None
    history: list[tuple[int, str]] = []
    trail: list[dict] = []
    for k, b in enumerate(budgets):
        if k:
            run = extend(run, b)
        stats, measures = judge(run, earlier)
        last = k == len(budgets) - 1
        outcome = combine(stats, earlier)
        history.append((int(b), outcome.value if outcome is not Outcome.UNDECIDED or last else "escalate"))
        if earlier is not None:
            measures = {**measures, "escalated_from": int(budgets[0])}
        trail.append(measures)
        v = Verdict(outcome, measures, list(stats), int(b), list(history), trail=list(trail))
        if outcome is not Outcome.UNDECIDED or last:
            v.seconds = time.perf_counter() - start
            return v, run
        earlier = v
    raise AssertionError("unreachable: budgets must be non-empty")
