"""Assertion helpers shared by the property modules: each failure says what was expected and what came,
and carries the problem file that replays it."""
from __future__ import annotations

import json

import numpy as np
from hypothesis import event

from reports.record import record_inputs


def describe(problem) -> str:
    return json.dumps(problem.to_json(), separators=(",", ":"))


def note_problem(problem, analysis=None) -> None:
    """Events and report inputs for one generated problem (what the report charts as coverage)."""
    stats = {"K": problem.K, "n": problem.n, "T": max(len(s) for s in problem.sequences), "d": problem.d}
    if analysis is not None:
        stats.update(n_sccs=analysis.n_sccs, dim_sfin=analysis.space.dim, svm_norm=analysis.svm.norm)
        event(f"cyclic={analysis.cyclic}")
        event(f"#SCCs={analysis.n_sccs}")
        event(f"dim S_fin={analysis.space.dim}")
        event("W^svm=0" if analysis.svm.norm == 0 else "W^svm≠0")
    record_inputs(**stats)


def assert_verdict(verdict, problem, what: str) -> None:
    assert verdict.passed, f"{what}: {verdict}\nproblem file: {describe(problem)}"


def assert_close(got, expected, atol: float, what: str, problem=None, *, relative: bool = False) -> None:
    """``max |got - expected| <= atol``; with ``relative``, the bound is ``atol * ||expected||_F`` (for
    answers whose scale is the problem's, like ``W^svm``: ``E -> αE`` sends it to ``W/α²``)."""
    got, expected = np.asarray(got, float), np.asarray(expected, float)
    err = float(np.max(np.abs(got - expected))) if got.size else 0.0
    scale = float(np.linalg.norm(expected)) if relative else 1.0
    bound = atol * scale
    kind = f"{atol:g} x ||expected||_F = {bound:.3g}" if relative else f"{atol:g}"
    msg = f"{what}: max |got - expected| = {err:.3g} > {kind}\nexpected:\n{np.round(expected, 6)}\ngot:\n{np.round(got, 6)}"
    if problem is not None:
        msg += f"\nproblem file: {describe(problem)}"
    assert got.shape == expected.shape and err <= bound, msg


def plant_stall_past(monkeypatch, steps: int, eta: float) -> None:
    """Plant a continuation whose integrator fails at every stage in each decade ending past ``steps``
    steps-equivalent (``t = eta steps``)."""
    from theory.li2024 import continuation

    decade = continuation._decade

    def stalling(flow, a, b, *args, **kw):
        if b > np.log(eta * steps) + 1e-9:
            raise continuation._SegmentStall("planted stall")
        return decade(flow, a, b, *args, **kw)

    monkeypatch.setattr(continuation, "_decade", stalling)
