"""Gradients that stay exact when attention saturates (theory.li2024.losses.softmax_backward and the compiled
engine's step 2), and the one rule of normalized GD below the gradient's rounding floor.

The reference here is independent of both engines: a 50-digit mpmath evaluation of ``dl/ds`` written
from the model's definition in the pairwise form ``ds_t = a_t sum_j a_j (g_t - g_j)`` (an antisymmetric
sum: no difference of two nearly equal numbers), with ``g = dl/da`` taken from the loss as written in
docs/theory.md.  Inputs are one sample with one token's score up to 700 above the others, i.e. attention
``1 - 1e-304`` on it: the regime where the textbook ``a_t (g_t - <a, g>)`` returns rounding noise.
"""
from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import event, example, given, note
from hypothesis import strategies as st

from properties.li2024.exact import mp_score_gradient
from theory.li2024.engine import gd_compiled
from theory.li2024.losses import TokenData, _per_sample, loss_grad_and_floor
from theory.core.problem import Problem
from theory.li2024.training import gd_numpy

pytestmark = pytest.mark.theorem("Engine")

MP_REL = 1e-8  # agreement with the 50-digit reference, relative to the largest entry
SUM_REL = 1e-12  # |sum_t ds_t| relative to the largest |ds_t|


@st.composite
def saturated_samples(draw, losses=st.sampled_from(["log", "ce", "square", "exp", "lsq"])):
    """One sample in token space: ``(scores s, counts c, head H, label y, loss)`` with a margin up to 700."""
    K = draw(st.integers(2, 6), label="K")
    present = draw(st.lists(st.integers(0, K - 1), min_size=2, max_size=K, unique=True), label="tokens")
    counts = np.zeros(K)
    for t in present:
        counts[t] = draw(st.integers(1, 3), label="count")
    loss = draw(losses, label="loss")
    y = draw(st.sampled_from(present), label="label")
    base = np.array(draw(st.lists(st.floats(-3, 3), min_size=K, max_size=K), label="base scores"))
    top = draw(st.sampled_from(present), label="saturated token")
    margin = draw(st.floats(0.0, 700.0), label="margin")
    s = base.copy()
    s[top] += margin
    head = draw(st.sampled_from(["biorthogonal", "random", "near-tied"]), label="head")
    if head == "biorthogonal":
        H = np.eye(K)
    else:
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="head seed"))
        H = rng.normal(size=(K, K))
        if head == "near-tied":  # head columns nearly equal: g_t - g_r is itself a small difference
            H = H[:, :1] + 1e-6 * H
    if loss == "log" and head != "biorthogonal":
        H = np.abs(H) + 0.1  # u = h_y . a > 0: -log u finite
    event(f"loss={loss}")
    event(f"head={head}")
    event("margin >= 300" if margin >= 300 else "margin < 300")
    return s, counts, H, y, loss


def token_data(counts, H, y, loss) -> TokenData:
    K = len(counts)
    return TokenData(counts=counts[None, :].astype(float), queries=np.array([0]), labels=np.array([y]),
                     weights=np.array([1.0]), H=H, loss=loss, biorthogonal=bool(np.array_equal(H, np.eye(K))))


def scores_matrix(s) -> np.ndarray:
    A = np.zeros((len(s), len(s)))
    A[:, 0] = s  # the sample's query is token 0: its scores are column 0
    return A


def engine_score_gradient(s, counts, H, y, loss) -> np.ndarray:
    """dl/ds from the compiled engine: one plain GD step of size 1 from A0 with M = I moves B by G."""
    data = token_data(counts, H, y, loss)
    B, _ = gd_compiled(scores_matrix(s), data, np.eye(len(s)), 1.0, [0, 1])
    return B[1][:, 0]


def numpy_score_gradient(s, counts, H, y, loss) -> np.ndarray:
    _, ds = _per_sample(scores_matrix(s), token_data(counts, H, y, loss))
    return ds[0]


def textbook_score_gradient(s, counts, H, y, loss) -> np.ndarray:
    """The cancelling form ``a (g - <a, g>)`` this module guards against (for the calibration test)."""
    logits = s + np.log(np.where(counts > 0, counts, 1.0))
    logits = np.where(counts > 0, logits, -np.inf)
    a = np.exp(logits - logits.max())
    a /= a.sum()
    if loss in ("ce", "lsq"):
        z = H @ a
        p = np.exp(z - z.max())
        p /= p.sum()
        py = p[y]
        p[y] -= 1.0
        g = H.T @ p if loss == "ce" else H.T @ (2 * py * (1 - py) * p)
    else:
        u = H[y] @ a
        g = {"log": -1 / u, "square": -2 * (1 - u), "exp": -np.exp(-u)}[loss] * H[y]
    return a * (g - a @ g)


ENGINES = {"numpy": numpy_score_gradient, "compiled": engine_score_gradient}


def check_sums_to_zero(ds) -> str | None:
    big = float(np.abs(ds).max())
    total = float(abs(ds.sum()))
    if total > SUM_REL * big:
        return f"sum of dl/ds = {total:.3g} but largest entry {big:.3g} (allowed {SUM_REL:g} of it)"
    return None


def check_against_mp(ds, ref) -> str | None:
    big = float(np.abs(ref).max())
    err = float(np.abs(ds - ref).max())
    if err > MP_REL * big or (big == 0 and err > 0):
        return f"max |dl/ds - 50-digit| = {err:.3g}, largest 50-digit entry {big:.3g} (allowed {MP_REL:g} of it)"
    return None


@pytest.mark.parametrize("engine", sorted(ENGINES))
@given(sample=saturated_samples())
def test_score_gradient_sums_to_zero(engine, sample):
    """Each sample's score gradient sums to zero (softmax is shift invariant) within 1e-12 of its largest
    entry, at margins up to 700."""
    ds = ENGINES[engine](*sample)
    note(f"dl/ds = {ds!r}")
    msg = check_sums_to_zero(ds)
    assert msg is None, f"{engine}: {msg}"


@pytest.mark.parametrize("engine", sorted(ENGINES))
@given(sample=saturated_samples())
# stress-found: square loss, label saturated at margin 20, 1.0 - u kept 7 digits (now sum a_t (1 - h_t))
@example(sample=(np.array([20.0, 0.0, 0.0]), np.array([1.0, 1.0, 0.0]), np.eye(3), 0, "square"))
def test_score_gradient_matches_50_digits(engine, sample):
    """The score gradient agrees with a 50-digit evaluation to 1e-8 relative, at margins up to 700."""
    ds = ENGINES[engine](*sample)
    ref = mp_score_gradient(*sample)
    note(f"got {ds!r}\n50-digit {ref!r}")
    msg = check_against_mp(ds, ref)
    assert msg is None, f"{engine}: {msg}"


def mp_lsq_gradient_by_differentiation(s, counts, H, y) -> np.ndarray:
    """dl/ds of ``lsq`` by numerical differentiation (mpmath.diff) of the loss as docs/theory.md writes it,
    ``(1 - softmax(H a)_y)^2`` with ``a = softmax(s + log c)``: no derived gradient formula involved.
    The precision grows with the score spread so that the attention of the smallest token (~e^{-spread})
    still moves the loss by many significant digits."""
    K = len(s)
    idx = [t for t in range(K) if counts[t] > 0]
    spread = float(max(s[t] for t in idx) - min(s[t] for t in idx))
    with mpmath.workdps(60 + int(0.45 * spread)):
        Hm = [[mpmath.mpf(float(H[i, j])) for j in range(K)] for i in range(K)]
        base = {t: mpmath.mpf(float(s[t])) + mpmath.log(mpmath.mpf(float(counts[t]))) for t in idx}

        def loss_at(t, x):
            logits = dict(base)
            logits[t] = x + mpmath.log(mpmath.mpf(float(counts[t])))
            top = max(logits.values())
            ex = {j: mpmath.exp(v - top) for j, v in logits.items()}
            S = mpmath.fsum(ex.values())
            z = [mpmath.fsum(Hm[lab][j] * ex[j] / S for j in idx) for lab in range(K)]
            zt = max(z)
            pe = [mpmath.exp(v - zt) for v in z]
            return (1 - pe[y] / mpmath.fsum(pe)) ** 2

        out = np.zeros(K)
        for t in idx:
            out[t] = float(mpmath.diff(lambda x: loss_at(t, x), mpmath.mpf(float(s[t]))))
        return out


@pytest.mark.parametrize("engine", sorted(ENGINES))
@given(sample=saturated_samples(losses=st.just("lsq")))
def test_lsq_gradient_matches_differentiated_definition(engine, sample):
    """The ``lsq`` loss (1 - softmax(C f)_y)^2 (Li et al. Section 5): the engines' score gradient agrees to
    1e-8 relative with mpmath's numerical derivative of the loss itself, at margins up to 700."""
    ds = ENGINES[engine](*sample)
    ref = mp_lsq_gradient_by_differentiation(*sample[:4])
    note(f"got {ds!r}\ndifferentiated {ref!r}")
    msg = check_against_mp(ds, ref)
    assert msg is None, f"{engine}: {msg}"


def test_lsq_gradient_check_catches_a_wrong_coefficient():
    """Calibration: the ce gradient (the lsq one without its factor 2 p_y (1 - p_y)) fails the check."""
    K = 3
    s = np.array([2.0, 0.3, -0.2])
    H = np.random.default_rng(1).normal(size=(K, K))
    sample = (s, np.ones(K), H, 1, "lsq")
    ref = mp_lsq_gradient_by_differentiation(*sample[:4])
    assert check_against_mp(numpy_score_gradient(*sample), ref) is None
    assert check_against_mp(numpy_score_gradient(s, np.ones(K), H, 1, "ce"), ref) is not None


def test_textbook_form_fails_both_checks():
    """Calibration: the cancelling textbook form is caught by both properties on a saturated input
    (a margin of 60 is enough: a_r = 1 - 1e-26 rounds to 1)."""
    K = 3
    s = np.array([60.0, 0.3, -0.2])
    counts = np.ones(K)
    H = np.random.default_rng(0).normal(size=(K, K))
    sample = (s, counts, H, 1, "ce")
    ds = textbook_score_gradient(*sample)
    assert check_against_mp(ds, mp_score_gradient(*sample)) is not None
    assert check_sums_to_zero(ds) is not None or check_against_mp(ds, mp_score_gradient(*sample)) is not None
    for engine in ENGINES.values():  # and the engines pass on the same input
        assert check_against_mp(engine(*sample), mp_score_gradient(*sample)) is None


# ------------------------------------------------------------------------------------------------
# Normalized GD below the rounding floor: no step, in both engines
# ------------------------------------------------------------------------------------------------
def two_label_problem() -> Problem:
    """Query 0 with tokens {0, 1}, once labelled 0 and once 1: ``L`` is minimal where both get attention
    1/2, i.e. at equal scores, and the gradient there is 0 (W^svm = 0: no ⇒ edge)."""
    E = np.array([[1.0, 0.0], [0.3, 0.9]])
    return Problem.create(E, [[1, 0], [1, 0]], [0, 1], "log")


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_normalized_gd_takes_no_step_below_the_floor(engine):
    """Scores 3e-15 apart from the minimizer: the true gradient (~1e-15) is below its rounding floor, so
    normalized GD takes no step (the rule in theory.li2024.training) where ``η g/||g||`` would jump by η.  Half
    a unit away, the same run moves by η per step (the rule does not freeze ordinary GD)."""
    problem = two_label_problem()
    data = TokenData.from_problem(problem)
    M, E = problem.gram, problem.E
    run = gd_numpy if engine == "numpy" else gd_compiled
    for gap, moves in ((3e-15, False), (0.5, True)):
        A0 = np.zeros((2, 2))
        A0[1, 0] = gap
        _, G, floor = loss_grad_and_floor(A0, data, M)
        gn = float(np.linalg.norm(E.T @ G @ E))
        assert (gn > floor) == moves, f"gap {gap}: ||grad|| {gn:.3g} vs floor {floor:.3g}"
        B, _ = run(A0, data, M, 0.1, [0, 5], normalized=True)
        moved = float(np.linalg.norm(E.T @ B[-1] @ E))
        if moves:
            assert moved > 0.1, f"{engine}: normalized GD did not move at gap {gap} (moved {moved:.3g})"
        else:
            assert moved == 0.0, f"{engine}: normalized GD stepped on rounding noise at gap {gap} (moved {moved:.3g})"
