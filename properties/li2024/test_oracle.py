"""The suite's targets and Theorem 2's verdict against an independent oracle (oracles/one_query.py).

Before the suite tells a user that a published result fails or holds, a computation that shares no code
with ``theory/`` must agree.  :mod:`oracles.one_query` is that computation for tiny one-query problems
(every sequence ends in token 0, orthonormal embeddings, the default head): there ``W`` enters only
through ``K`` scores and the Graph-SVM, ``W^fin`` and the regularisation path are small problems in
numpy/scipy.  The properties compare:

* ``W^svm``: within 1e-6 relative (the oracle re-solves its active set exactly; the suite certifies its
  own exactly, so the slack is only float64 rounding of a K x K solve);
* existence of ``W^fin``, and ``W^fin`` within 1e-5 max(1, |W^fin|): the oracle's own error estimate
  ``|∇L̃|/λ_min`` is kept below 1e-7 (else the example is not judged), the rest is the suite's certified
  tolerance;
* Theorem 2: where the oracle's path converges (direction and finite part, oracle.read_path), the suite
  must never say "fails";
* plain GD: the suite's W after a few hundred steps against GD on the oracle's scores.

Regression tests pin the two hand-checked problems of the brief: the exp- and log-loss example (the path's
finite part ``δ = v_1 - v_0`` tends to 1.7080 and ln 2) and the exp-loss problem whose ``L̃`` has no finite
minimiser.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from oracles import one_query as oracle
from properties.judging import not_judged
from theory.core.problem import Problem
from theory.li2024.analysis import analyze
from theory.li2024.claims import THEOREM2

pytestmark = pytest.mark.theorem("Theorem 2")

SVM_RTOL = 1e-6
FIN_TOL = 1e-5  # oracle's estimate <= oracle.FIN_TOL = 1e-7; the suite's W^fin is certified far below this
GD_RTOL = 1e-8

EXAMPLE = {"embeddings": np.eye(3).tolist(), "sequences": [[1, 0], [1, 0], [1, 2, 0]], "labels": [1, 0, 1]}
NO_MINIMIZER = {"embeddings": np.eye(3).tolist(), "sequences": [[2, 1, 1, 0], [1, 0], [1, 2, 0]],
                "labels": [0, 1, 1], "loss": "exp"}


# ------------------------------------------------------------------------------------------------
# The strategy: tiny one-query problems
# ------------------------------------------------------------------------------------------------
@st.composite
def one_query_problems(draw):
    """A problem file (dict): K in 2..4, E = I_K or a random rotation of it, the default head, 1..4
    sequences of length 1..4 ending in token 0, each label drawn from its sequence, loss log/exp/square."""
    K = draw(st.integers(2, 4), label="K")
    E = np.eye(K)
    if draw(st.booleans(), label="rotated embeddings"):
        seed = draw(st.integers(0, 2 ** 32 - 1), label="rotation seed")
        Q, R = np.linalg.qr(np.random.default_rng(seed).standard_normal((K, K)))
        E = Q * np.sign(np.diag(R))  # a Haar rotation; rows orthonormal
    n = draw(st.integers(1, 4), label="number of sequences")
    seqs, labels = [], []
    for i in range(n):
        seq = draw(st.lists(st.integers(0, K - 1), max_size=3), label=f"sequence {i} before the query") + [0]
        seqs.append(seq)
        labels.append(draw(st.sampled_from(sorted(set(seq))), label=f"label {i}"))
    loss = draw(st.sampled_from(("log", "exp", "square")), label="loss")
    return {"embeddings": E.tolist(), "sequences": seqs, "labels": labels, "loss": loss}


def _replay(data) -> str:
    return json.dumps(data, separators=(",", ":"))


def _finite(q):
    try:
        return oracle.finite_part(q)
    except oracle.OracleUndecided:
        not_judged("the oracle cannot decide W^fin (ball test ambiguous or estimate above its tolerance)")


# ------------------------------------------------------------------------------------------------
# Targets
# ------------------------------------------------------------------------------------------------
@pytest.mark.judged(floor=0.9)
@settings(max_examples=25, deadline=None)
@given(data=one_query_problems())
def test_graph_svm_matches_oracle(data):
    """The suite's W^svm equals the oracle's E^T v^svm e_0^T within 1e-6 relative (zero when no ⇒ edge)."""
    an = analyze(Problem.create(**data), finite=False)
    q = oracle.OneQuery.from_json(data)
    W = q.W(oracle.graph_svm(q))
    event("W^svm = 0" if np.linalg.norm(W) == 0 else "W^svm ≠ 0")
    err = float(np.linalg.norm(an.svm.W - W))
    assert err <= SVM_RTOL * max(float(np.linalg.norm(W)), 1e-12), (
        f"W^svm: suite {an.svm.W[:, 0]} ... vs oracle column {W @ q.E[0]}, |ΔW| = {err:.3g}\n"
        f"problem file: {_replay(data)}")
    assert abs(an.svm.norm - np.linalg.norm(W)) <= SVM_RTOL * max(np.linalg.norm(W), 1e-12)


@pytest.mark.judged(floor=0.8)
@settings(max_examples=20, deadline=None)
@given(data=one_query_problems())
def test_finite_part_matches_oracle(data):
    """The suite and the oracle agree on whether L̃ has a finite minimiser on S_fin, and on W^fin within
    1e-5 max(1, |W^fin|)."""
    an = analyze(Problem.create(**data))
    q = oracle.OneQuery.from_json(data)
    fin = _finite(q)
    event(f"loss {data['loss']}: W^fin {'exists' if fin.exists else 'absent'}")
    assert (an.finite is not None) == fin.exists, (
        f"existence of W^fin: suite {'W^fin' if an.finite is not None else an.finite_absent!r}, oracle "
        f"{'W^fin = ' + str(fin.v) if fin.exists else 'absent, balls (R, |z|, L̃) = ' + str(fin.balls)}\n"
        f"problem file: {_replay(data)}")
    assert (an.finite_absent is None) == fin.exists
    if fin.exists:
        W = q.W(fin.v)
        err = float(np.linalg.norm(an.finite.W - W))
        assert err <= FIN_TOL * max(1.0, float(np.linalg.norm(W))), (
            f"W^fin: |suite - oracle| = {err:.3g}; oracle scores {fin.v} (estimate {fin.error_estimate:.2g})\n"
            f"problem file: {_replay(data)}")


@pytest.mark.judged(floor=0.8)
@settings(max_examples=20, deadline=None)
@given(data=one_query_problems(), steps=st.integers(1, 300))
def test_gradient_descent_matches_oracle(data, steps):
    """The suite's GD from W = 0 equals GD on the oracle's scores (W(τ) = E^T v(τ) e_0^T), step 0.5."""
    from theory.li2024.training import train

    p = Problem.create(**data)
    q = oracle.OneQuery.from_json(data)
    eta = 0.5  # below 2/β for these losses on scores (|∇²| <= 2 for log, less for exp and square)
    W = train(p, steps, eta, checkpoints=[steps]).final.W
    Wo = q.W(oracle.gradient_descent(q, steps, eta))
    err = float(np.linalg.norm(W - Wo))
    assert err <= GD_RTOL * max(1.0, float(np.linalg.norm(Wo))), (
        f"GD after {steps} steps: |suite - oracle| = {err:.3g}\nproblem file: {_replay(data)}")


# ------------------------------------------------------------------------------------------------
# Theorem 2's verdict
# ------------------------------------------------------------------------------------------------
@pytest.mark.judged(floor=0.3)
@settings(max_examples=15, deadline=None)
@given(data=one_query_problems())
def test_theorem2_never_fails_where_the_oracle_path_converges(data):
    """Where the oracle's regularisation path converges (direction error and finite error small and
    falling at margin 16), THEOREM2.check must not say "fails"."""
    q = oracle.OneQuery.from_json(data)
    svm = oracle.graph_svm(q)
    if np.linalg.norm(svm) == 0:
        not_judged("W^svm = 0 (Theorem 2 not applicable)")
    fin = _finite(q)
    reading = oracle.read_path(q, svm, fin)
    verdict = THEOREM2.check(Problem.create(**data))
    outcome = verdict.outcome.value
    event(f"suite: {outcome}")
    if not fin.exists:
        # Recorded, not asserted here: see test_theorem2_no_minimizer_direction_does_not_hold.
        event(f"no W^fin: oracle direction {'diverges' if reading.direction_diverges else 'unclear'}, suite {outcome}")
        not_judged("no W^fin (the oracle's path has no finite target)")
    if not reading.converges:
        not_judged("the oracle's path has not converged by margin 16")
    assert outcome != "fails", (
        f"Theorem 2: suite says fails ({verdict.reason_text}) but the oracle's path converges: {reading.why}\n"
        f"problem file: {_replay(data)}")


# ------------------------------------------------------------------------------------------------
# Regression: the hand-checked problems
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss, half_delta", [("exp", 0.8539880), ("log", np.log(2) / 2)])
def test_example_finite_part_and_theorem2(loss, half_delta):
    """E = I_3, sequences [[1,0],[1,0],[1,2,0]], labels [1,0,1]: W^fin = ±δ/2 on tokens 1 and 0 with
    δ = 1.7080 (exp) and ln 2 (log), the same in oracle and suite, the oracle's path converges to it and
    Theorem 2 holds."""
    data = dict(EXAMPLE, loss=loss)
    q = oracle.OneQuery.from_json(data)
    fin = oracle.finite_part(q)
    expected = np.array([-half_delta, half_delta, 0.0])
    assert np.allclose(fin.v, expected, atol=1e-6), fin.v
    an = analyze(Problem.create(**data))
    assert np.allclose(an.finite.W[:, 0], expected, atol=1e-6), an.finite.W
    assert np.allclose(an.svm.W[:, 0], [1 / 3, 1 / 3, -2 / 3], atol=1e-9), an.svm.W
    reading = oracle.read_path(q, fin=fin)
    assert reading.converges, reading.why
    v = THEOREM2.check(Problem.create(**data))
    assert v.outcome.value == "holds", v.reason_text


# E = I_2, sequences [[0,1,0],[0,1,0,0],[0,1,0,0]], labels [0,1,1], square loss: with x = e^δ, δ = v_1 - v_0,
# L̃ = ((x/(2+x))^2 + 2 (3/(3+x))^2)/3 tends to 1/3 (δ -> ∞) and 2/3 (δ -> -∞) but is 0.2614029 at δ = 1.86091
# (a 1-d scan of the closed form agrees): a strict global minimiser, W^fin = ±0.930456 on tokens 1 and 0.
# (A 4-token one the same way: E = I_4, [[0,3,0],[3,2,0,0],[3,3,2,0],[0,1,3,0]], labels [0,3,2,3], square.)
SQUARE_FINITE = {"embeddings": np.eye(2).tolist(), "sequences": [[0, 1, 0], [0, 1, 0, 0], [0, 1, 0, 0]],
                 "labels": [0, 1, 1], "loss": "square"}


def test_square_loss_example_has_a_finite_minimizer():
    """The oracle's side of the next test: W^fin = ±0.930456 with L̃ = 0.2614029 < 1/3 = L̃(+∞)."""
    q = oracle.OneQuery.from_json(SQUARE_FINITE)
    fin = oracle.finite_part(q)
    assert fin.exists and fin.min_curvature > 0.01 and fin.error_estimate < 1e-9, fin
    assert np.allclose(fin.v, [-0.93045562, 0.93045562], atol=1e-7), fin.v
    assert abs(min(val for _, _, val in fin.balls) - 0.2614029081) < 1e-9, fin.balls


def test_square_loss_finite_minimizer_is_found():
    """L̃ has a strict global minimiser (L̃ = 0.2614 at δ = 1.861) and a higher infimum 1/3 at infinity: the
    suite's Newton descent jumped past it to ||W|| = 41 and reported no minimiser, until a trust radius kept
    the descent of a non-convex L̃ in its basin (theory/li2024/finite.py)."""
    q = oracle.OneQuery.from_json(SQUARE_FINITE)
    an = analyze(Problem.create(**SQUARE_FINITE))
    assert an.finite is not None, an.finite_absent
    assert np.linalg.norm(an.finite.W - q.W(oracle.finite_part(q).v)) <= FIN_TOL


def test_no_minimizer_example_is_absent():
    """E = I_3, sequences [[2,1,1,0],[1,0],[1,2,0]], labels [0,1,1], exp loss: L̃ = (e^{-u_1} + 2e^{-u_2})/3
    with u_1 = 1/(1 + 2e^δ), u_2 = 1/(1 + e^{-δ}) falls toward δ -> ∞: no W^fin, for oracle and suite.  The
    path's S_fin part grows with R (δ ≈ 1.9, 3.9, 7.8, 15.8 at margins 2..16), so W̄_R/R stays about 1 away
    from Ŵ^svm (0.95 -> 0.98, growing)."""
    q = oracle.OneQuery.from_json(NO_MINIMIZER)
    assert not oracle.finite_part(q).exists
    an = analyze(Problem.create(**NO_MINIMIZER))
    assert an.finite is None and isinstance(an.finite_absent, str), an.finite
    reading = oracle.read_path(q)
    assert reading.direction_diverges, reading.why


def test_theorem2_no_minimizer_direction_does_not_hold():
    """On the no-minimiser problem W̄_R/R does not approach Ŵ^svm (previous test, the oracle), so the suite
    must not say Theorem 2 holds: it judges the whole W̄_R/R where W^fin does not exist.  The oracle (no code
    shared with theory/) shows the direction conclusion failing on a problem the statement covers (exp is
    strictly decreasing with bounded |l'|, Assumptions 1-2 hold, W^svm != 0): a finding about the statement.
    The suite's own verdict is "undecided" when its non-convex path met several certified local minima on a
    sphere (it claims a failure only when every start agrees), "fails" otherwise.  (It said "holds", judging
    only the part off S_fin, until then.)"""
    v = THEOREM2.check(Problem.create(**NO_MINIMIZER))
    assert v.outcome.value in ("fails", "undecided"), f"suite: {v.outcome.value} ({v.reason_text})"
    assert v.measures["finite"] == "not applicable" and "whole" in v.reason_text, v.reason_text


# L̃ = (e^{-u_1} + e^{-u_2})/2 with u_1 = 1/(1 + 2e^δ), u_2 = 1/(1 + 2e^{-δ}) is even in δ = v_1 - v_0: W = 0
# is a stationary point with negative curvature (a maximum, 0.7165), and L̃ falls to (1 + e^{-1})/2 = 0.6839
# as |δ| -> ∞, so there is no W^fin.
SADDLE_AT_ZERO = {"embeddings": np.eye(2).tolist(), "sequences": [[1, 1, 0], [0, 1, 0]], "labels": [0, 1],
                  "loss": "exp"}


def test_saddle_at_zero_example_has_no_minimizer():
    fin = oracle.finite_part(oracle.OneQuery.from_json(SADDLE_AT_ZERO))
    assert not fin.exists, fin
    assert abs(fin.balls[-1][2] - (1 + np.exp(-1)) / 2) < 1e-12, fin.balls


def test_saddle_at_zero_is_reported_absent():
    """analyze reports the stationary maximum's problem as having no W^fin (it raised SolverError, 'Newton
    step inf at ||W|| = 0, smallest curvature -3.54e-02', until theory/li2024/finite.py descended off it)."""
    an = analyze(Problem.create(**SADDLE_AT_ZERO))
    assert an.finite is None and isinstance(an.finite_absent, str), an.finite


# ------------------------------------------------------------------------------------------------
# A Theorem 2 "fails" is reported only where the oracle confirms it
# ------------------------------------------------------------------------------------------------
PLANTED_ONE_QUERY = {"embeddings": np.eye(3).tolist(), "sequences": [[2, 0], [2, 1, 2, 0]], "labels": [0, 1]}


def _plant_wrong_svm(monkeypatch) -> None:
    """The suite's analysis with W^svm rotated 35° within its norm (a defect of the suite)."""
    from dataclasses import replace

    from theory.li2024 import analysis as module
    from theory.li2024.plants import wrong_direction

    real = module.analyze

    def planted(problem, *args, **kwargs):
        an = real(problem, *args, **kwargs)
        return replace(an, svm=replace(an.svm, W=an.svm.norm * wrong_direction(an, 35.0, 0)))

    monkeypatch.setattr(module, "analyze", planted)


@pytest.mark.parametrize("source, said", [
    ("one-query", "not confirmed by the independent computation (oracles/one_query.py)"),
    ("examples/regpath_slow_direction.json", "no independent computation confirms it"),
])
def test_a_planted_theorem2_failure_is_not_reported(monkeypatch, source, said):
    """A W^svm 35° off inside the suite makes its own path judge reject the direction at the escalated margins
    (e⊥ kept at 0.60 from t = 1 to 64); ``tpg check``'s verdict is undecided, not "fails": on the one-query file
    the oracle's own path converges (direction errors 4.2e-3 .. 0 at t = 2..16), and on a general file (three
    embeddings in d = 3 that are not orthonormal) no independent computation exists, which the reason says."""
    p = Problem.create(**PLANTED_ONE_QUERY) if source == "one-query" else Problem.load(source)
    _plant_wrong_svm(monkeypatch)
    v = THEOREM2.judge(p)
    assert v.measures["direction"] == "fails", f"the plant did not reach the suite's rejection: {v}"
    assert v.outcome.value == "undecided" and v.measures.get("independently_confirmed") is False, v
    assert said in v.reason, v.reason


def test_the_oracle_confirms_a_direction_that_does_not_converge():
    """The oracle's reject line can say yes: on the exp loss without a finite minimizer the whole ``W̄_R/R``
    tends elsewhere (shifted errors 0.945, 0.954, 0.970, 0.982 at t = 2..16), and it confirms a direction
    rejection; on the log-loss example, whose path converges, it confirms neither limit."""
    confirmed, said = oracle.confirm_theorem2(NO_MINIMIZER, ["direction"])
    assert confirmed, said
    confirmed, said = oracle.confirm_theorem2(EXAMPLE, ["direction", "finite"])
    assert not confirmed, said
