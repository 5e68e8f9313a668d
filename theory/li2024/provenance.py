"""Which engine produced a checkpoint or a budget: discrete GD or the log-time continuation
(:mod:`theory.li2024.continuation`), and the bound on the distance between the two at a continued checkpoint.

A verdict records this per budget (``Verdict.trail``, :func:`theory.li2024.criteria.escalate`), so it lives
below both the judge and the continuation engine.
"""
from __future__ import annotations

__all__ = ["ContinuationFailed", "deviation", "deviation_from_exact", "engine_label", "engine_measures", "engine_of"]


def engine_of(c) -> str:
    """``"gd"`` or ``"continuation"``: which engine produced checkpoint ``c``."""
    return getattr(c, "engine", "gd")


def deviation(c) -> float:
    """The bound on ``||W_GD - W||_F`` at a checkpoint: 0 for a GD checkpoint; for a continuation checkpoint
    ``D(τ)`` + its measured integration error + its tolerance floor + GD's rounding
    (:mod:`theory.li2024.continuation`'s docstring)."""
    if engine_of(c) == "gd":
        return 0.0
    return c.gd_deviation_bound + (c.integration_error or 0.0) + getattr(c, "rounding_floor", 0.0) + c.gd_rounding


def deviation_from_exact(c) -> float:
    """The bound on ``||W_exact - W||_F`` at a checkpoint, ``W_exact`` GD in exact arithmetic (what the theorems
    speak of): ``D(τ)`` + the measured integration error + the tolerance floor (``rounding_floor``) for a
    continuation checkpoint, 0 for a GD one.  The
    float GD engine's own rounding (``gd_rounding``, in :func:`deviation`) matters only where the continuation
    is compared with that engine's runs; charged linearly over 10^12 steps it would dominate every bound."""
    if engine_of(c) == "gd":
        return 0.0
    return c.gd_deviation_bound + (c.integration_error or 0.0) + getattr(c, "rounding_floor", 0.0)


def engine_label(run) -> str:
    """Which engine produced ``run``'s last budget: ``"gd"``, ``"continuation"``, or GD's fallback with the
    reason the continuation was not trusted (``"gd (continuation disagreed: ...)"``)."""
    if engine_of(run.final) != "gd":
        return "continuation"
    notes = getattr(run, "notes", None)
    return notes[-1] if notes else "gd"


def engine_measures(run) -> dict:
    """The measures a verdict records about the engine of its budget (:func:`engine_label`); for a
    continued budget also ``continued_from`` (GD's last step) and ``gd_deviation_bound`` (:func:`deviation`
    at the budget: how far discrete GD can be from the state judged, in Frobenius units of ``W``)."""
    m = {"engine": engine_label(run)}
    if m["engine"] == "continuation":
        m["continued_from"] = int(run.continued_from)
        m["gd_deviation_bound"] = deviation(run.final)
    return m


class ContinuationFailed(FloatingPointError):
    """The continuation failed past GD's budget (its integrator stalled) at ``steps``: the decision stops at
    the budget before (:func:`theory.li2024.criteria.escalate`)."""

    def __init__(self, steps: int, why: str):
        super().__init__(f"the continuation to {steps} steps failed: {why}")
        self.steps = steps
