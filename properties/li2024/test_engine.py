"""Properties of the compiled GD engine (theory/li2024/engine.py).

The references are independent of the engine: the numpy loop ``theory.li2024.training.gd_numpy`` (token space,
dense K x K products, per-sample softmax), and a textbook W-space GD written here (per-sample T x d
matrices, softmax over positions, analytic gradient in W).  Iterates must agree to 1e-10 (relative to
their size); where the reference's own trajectory amplifies rounding (normalized GD overshooting, measured
by a rounding-level probe: see AMPLIFIED), every step from the reference's state must agree instead.  Normalized GD is compared while the reference itself is accurate: once the label's
attention rounds to 1, ``a_y - 1`` (the reference) keeps no significant digits and the normalized
direction is rounding noise in any implementation, so normalized runs here move W by at most ~2.
"""
from __future__ import annotations

import re
from contextlib import nullcontext
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import currently_in_test_context, event, given, note, settings
from hypothesis import strategies as st

from properties.judging import scaled
from reports.record import record_inputs
from theory.li2024.engine import (EXP_FLOOR, UPDATE_BLOCK, UPDATE_KMAT, UPDATE_SPARSE, Packed, gd_batch, gd_compiled,
                           vector_exp)
from theory.li2024.losses import TokenData, loss_and_grad_scores
from theory.core.problem import LOSSES, Problem
from theory.li2024.training import gd_numpy, run_gd

pytestmark = pytest.mark.theorem("Engine")

TOL = 1e-10


# ------------------------------------------------------------------------------------------------
# Local strategies: small random problems (K 2-8, d >= K, unit-norm Gaussian embeddings)
# ------------------------------------------------------------------------------------------------
@st.composite
def problems(draw, losses=st.sampled_from(LOSSES), heads=st.sampled_from(["default", "tied"])):
    K = draw(st.integers(2, 8), label="K")
    d = draw(st.integers(K, K + 3), label="d")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    E = rng.normal(size=(K, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    n = draw(st.integers(1, 8), label="n")
    seqs = draw(st.lists(st.lists(st.integers(0, K - 1), min_size=2, max_size=6), min_size=n, max_size=n),
                label="sequences")
    loss = draw(losses, label="loss")
    # Labels in context (Assumption 2) for -log; anywhere for the other losses.
    labels = [draw(st.sampled_from(s) if loss == "log" else st.integers(0, K - 1)) for s in seqs]
    head = draw(heads, label="head")
    problem = Problem.create(E, seqs, labels, loss, head=E if head == "tied" else None)
    W0 = draw(st.floats(0.0, 1.0), label="W0 scale") * rng.normal(size=(d, d)) / d
    record_inputs(K=K, n=n, d=d, T=max(map(len, seqs)))
    return problem, W0


@st.composite
def runs(draw, losses=st.sampled_from(LOSSES)):
    """A problem, W(0), plain or normalized GD, a step size and log-ish checkpoints."""
    problem, W0 = draw(problems(losses))
    normalized = draw(st.booleans(), label="normalized")
    if normalized:
        steps = draw(st.integers(1, 60), label="steps")
        eta = draw(st.floats(0.005, 2.0 / steps), label="eta")  # total movement of W at most 2
    else:
        steps = draw(st.integers(1, 300), label="steps")
        eta = draw(st.floats(0.01, 1.0), label="eta")
    cps = np.unique(np.array([0, 1, steps // 3, steps // 2, steps], dtype=np.int64))
    return problem, W0, normalized, eta, cps


def _step_of(exc: Exception) -> int:
    return int(re.search(r"step (\d+)", str(exc)).group(1))


def _check(what, expected, got, problem, scale=None):
    """|expected - got| <= TOL * scale, ``scale`` = max(1, |expected|) unless given."""
    expected, got = np.asarray(expected, float), np.asarray(got, float)
    same = expected == got  # equal infinities (u <= 0 under a tied head: -log u = inf in both) agree
    finite = np.isfinite(expected)
    if scale is None:
        scale = max(1.0, float(np.abs(expected[finite]).max(initial=0.0)))
    err = float(np.abs(np.where(same, 0.0, expected - got)).max(initial=0.0))
    assert err <= TOL * scale, (f"{what}: max |reference - engine| = {err:.3g} > {TOL * scale:.3g}\n"
                                f"problem file: {problem.to_json()}")


def _numpy_or_error(A0, data, M, eta, cps, normalized):
    try:
        return gd_numpy(A0, data, M, eta, cps, normalized), None
    except FloatingPointError as exc:
        return None, exc


# The normalized step divides by ||grad||: near a minimizer a fixed-length step overshoots and each step
# multiplies earlier rounding differences (stress found a ce run oscillating at ||grad|| ~ 2e-5 whose two
# implementations drifted from 1e-14 to 1.2e-9 in four steps).  Below this norm the run is compared as
# plain GD instead.
WELL_POSED_GRAD = 1e-3


def _well_posed(A0, data, M, eta, cps, normalized) -> bool:
    """Normalized GD is a function of its inputs only away from stationary points: at one, its step is
    eta times a direction made of rounding (seen: two samples whose gradients cancel exactly), and two
    correct implementations may differ there by a whole step.  True unless the gradient norm falls below
    WELL_POSED_GRAD on this run."""
    if not normalized:
        return True
    try:
        every = np.arange(int(cps[-1]) + 1)
        Bs, _ = gd_numpy(A0, data, M, eta, every, True)
    except FloatingPointError:
        return True
    for B in Bs:
        _, G = loss_and_grad_scores(A0 - M @ B @ M, data)
        if np.sqrt(max(float(np.sum((G.T @ M @ G) * M.T)), 0.0)) < WELL_POSED_GRAD:
            return False
    return True


# A fixed-length normalized step also overshoots far from a stationary point, and there the two
# implementations' rounding differences grow by a constant factor per step whatever the gradient's size
# (stress seed 1329999067, log loss, tied head, eta = 1/32, 40 steps: ||grad|| 0.023-0.043, differences x2.7
# per step from step 24 on, 1.5e-10 at step 40; the numpy reference on the same samples in another order
# differed from itself by 1.25e-10).  Agreement of whole trajectories to 1e-10 is then a property of the
# dynamics, not of the implementation.  Measured, not guessed: when whole trajectories disagree, the
# reference is run again from W(0) changed at rounding level (AMPLIFY_PROBE, relative); if that moves its
# own checkpoints by more than TOL / 100, every single step is compared instead, from the reference's state
# (the local error of the map: a wrong gradient, step or loss fails there at once); otherwise the
# disagreement stands.
AMPLIFY_PROBE = 2.0 ** -50
AMPLIFIED = TOL / 100


def _rounding_drift(A0, data, M, eta, cps, normalized, ref) -> float:
    """max |B_ref(probe) - B_ref| at the checkpoints, the probe changing the problem at rounding level at
    every step, as another summation order does: W(0), the step size and each sample's weight, by
    AMPLIFY_PROBE (relative, fixed random signs).  (W(0) alone is not enough: the seed above contracts an
    initial change for 24 steps and its probe moved B by 0.0, while the per-step rounding grew to 1.5e-10.)"""
    rng = np.random.default_rng(0)
    sign = np.where(rng.random(A0.shape) < 0.5, -1.0, 1.0)
    A1 = A0 + AMPLIFY_PROBE * max(1.0, float(np.abs(A0).max())) * sign
    w1 = data.weights * (1.0 + AMPLIFY_PROBE * np.where(rng.random(data.weights.shape) < 0.5, -1.0, 1.0))
    try:
        B2, _ = gd_numpy(A1, replace(data, weights=w1), M, eta * (1.0 + AMPLIFY_PROBE), cps, normalized)
    except FloatingPointError:
        return np.inf
    return float(np.abs(np.asarray(B2) - np.asarray(ref[0])).max())


def _check_run(what, engine, A0, data, M, eta, cps, normalized, problem, ref):
    """``engine(A, checkpoints) -> (B, L)`` agrees with the numpy reference ``ref`` (on ``data``): whole
    trajectories to TOL, or, where the reference's own trajectory amplifies rounding (see AMPLIFIED),
    every step from the reference's state to TOL relative to the step's size."""
    B, L = engine(A0, cps)
    try:
        _check(f"{what}: B(tau)", ref[0], B, problem)
        _check(f"{what}: L(tau)", ref[1], L, problem)
        return
    except AssertionError as exc:
        failure = exc
    drift = _rounding_drift(A0, data, M, eta, cps, normalized, ref)
    if not drift > AMPLIFIED * max(1.0, float(np.abs(ref[0]).max())):
        raise failure
    if currently_in_test_context():
        event("the trajectory amplifies rounding: compared step by step")
    every = np.arange(int(cps[-1]) + 1)
    Bs, _ = gd_numpy(A0, data, M, eta, every, normalized)
    one = np.array([0, 1])
    for t in range(len(every) - 1):
        At = A0 - M @ Bs[t] @ M
        r1 = gd_numpy(At, data, M, eta, one, normalized)
        B1, L1 = engine(At, one)
        why = f"{what}, step {t + 1} from the reference's state (a 2^-50 probe moved the reference {drift:.2g})"
        # Relative to the step itself (eta-sized): a wrong step length shows at once.
        _check(f"{why}: B", r1[0], B1, problem, scale=float(np.abs(r1[0][-1]).max()))
        _check(f"{why}: L", r1[1], L1, problem)


# ------------------------------------------------------------------------------------------------
# Compiled == numpy reference
# ------------------------------------------------------------------------------------------------
@settings(deadline=None)
@given(runs())
def test_compiled_matches_numpy_reference(run):
    """For every loss, plain and normalized GD, default and tied heads: the compiled engine's B(tau) and
    L(tau) at every checkpoint equal the numpy reference loop's to 1e-10; when the reference diverges
    (an infinite loss, e.g. -log u with u <= 0 under a tied head) the engine raises at the same step."""
    problem, W0, normalized, eta, cps = run
    note(f"loss={problem.loss} normalized={normalized} eta={eta} checkpoints={cps.tolist()}")
    data = TokenData.from_problem(problem)
    M = problem.gram
    A0 = problem.E @ W0 @ problem.E.T
    if not _well_posed(A0, data, M, eta, cps, normalized):
        event("normalized GD met a stationary point: compared plain GD")
        normalized = False
    ref, err = _numpy_or_error(A0, data, M, eta, cps, normalized)
    if err is not None:
        with pytest.raises(FloatingPointError) as info:
            gd_compiled(A0, data, M, eta, cps, normalized)
        assert _step_of(info.value) == _step_of(err), f"diverged at {_step_of(info.value)}, reference: {err}"
        return
    _check_run("compiled vs numpy", lambda A, c: gd_compiled(A, data, M, eta, c, normalized),
               A0, data, M, eta, cps, normalized, problem, ref)


# ------------------------------------------------------------------------------------------------
# The three update paths of (M G M)_P agree (each forced on the same small problems)
# ------------------------------------------------------------------------------------------------
class _forced_update:
    """Force the engine's update path: ``kmat`` (P x P mat-vec), ``sparse`` (pair lists), ``block``
    (dense U x Q block by BLAS; chosen automatically only for P > DENSE_MAX_P filling the block) with the
    gradient through the entry lists, or ``block-dense-gradient`` (the -log gradient under Assumption 1 as
    dense rows, with the vectorized exp: what large problems use)."""

    SETTINGS = {"kmat": (10**9, 2.0, 2.0), "sparse": (-1, 2.0, 2.0), "block": (-1, 0.0, np.inf),
                "block-dense-gradient": (-1, 0.0, 0.0)}

    def __init__(self, mode):
        self.values = self.SETTINGS[mode]

    def __enter__(self):
        import theory.li2024.engine as eng
        self.saved = eng.DENSE_MAX_P, eng.BLOCK_MIN_FILL, eng.GRAD_MIN_FILL
        eng.DENSE_MAX_P, eng.BLOCK_MIN_FILL, eng.GRAD_MIN_FILL = self.values

    def __exit__(self, *exc):
        import theory.li2024.engine as eng
        eng.DENSE_MAX_P, eng.BLOCK_MIN_FILL, eng.GRAD_MIN_FILL = self.saved


@settings(deadline=None)
@given(runs())
def test_update_paths_match_numpy_reference(run):
    """The sparse, P x P and dense-block (BLAS) forms of the update, and the dense form of the -log
    gradient, each give the numpy reference's B(tau) and L(tau) to 1e-10 (the block path with the dense
    gradient is what large problems, P > 48, use)."""
    problem, W0, normalized, eta, cps = run
    data = TokenData.from_problem(problem)
    M = problem.gram
    A0 = problem.E @ W0 @ problem.E.T
    if not _well_posed(A0, data, M, eta, cps, normalized):
        normalized = False
    ref, err = _numpy_or_error(A0, data, M, eta, cps, normalized)
    for mode in _forced_update.SETTINGS:
        with _forced_update(mode):
            used = Packed(A0, data, M).ints
            if mode == "block-dense-gradient" and currently_in_test_context():
                event(f"dense gradient used: {bool(used[8])}")
            if err is not None:
                with pytest.raises(FloatingPointError) as info:
                    gd_compiled(A0, data, M, eta, cps, normalized)
                assert _step_of(info.value) == _step_of(err), f"{mode}: diverged at {_step_of(info.value)}"
                continue
            _check_run(f"{mode} update", lambda A, c: gd_compiled(A, data, M, eta, c, normalized),
                       A0, data, M, eta, cps, normalized, problem, ref)


def _ulps(got, want):
    """|got - want| in units of want's last place (0 where both are 0)."""
    return np.where(want == 0, np.where(got == 0, 0.0, np.inf), np.abs(got - want) / np.spacing(np.abs(want)))


@settings(deadline=None)
@given(st.lists(st.floats(min_value=-800.0, max_value=0.0), min_size=1, max_size=40).map(np.array))
def test_vector_exp_within_one_ulp_of_libm(x):
    """The dense-gradient path's exp is libm's exp to 1 ulp above EXP_FLOOR and exactly 0 at or below it,
    as the other paths take it."""
    want = np.where(x > EXP_FLOOR, np.exp(x), 0.0)
    got = vector_exp(x)
    worst = _ulps(got, want)
    assert worst.max() <= 1.0, f"x = {x[worst.argmax()]!r}: got {got[worst.argmax()]!r}, libm {want[worst.argmax()]!r}"


def test_vector_exp_on_a_grid_of_its_range():
    """A million points over (EXP_FLOOR - 1, 0], the range ends and the points where the range reduction
    changes k (odd multiples of ln2 / 2) and their neighbours: within 1 ulp of libm."""
    half = np.log(2.0) / 2 * np.arange(-2043, 1, 2)
    x = np.concatenate([np.linspace(EXP_FLOOR - 1.0, 0.0, 10**6), [EXP_FLOOR, np.nextafter(EXP_FLOOR, 0), -0.0,
                        -5e-324, -1e-300], half, np.nextafter(half, 0), np.nextafter(half, -np.inf)])
    x = x[x <= 0]
    want = np.where(x > EXP_FLOOR, np.exp(x), 0.0)
    worst = _ulps(vector_exp(x), want)
    assert worst.max() <= 1.0, f"x = {x[worst.argmax()]!r}: {worst.max()} ulp from libm"


def test_large_problems_use_the_dense_gradient_and_match_the_reference():
    """A problem of the benchmark's shape (unit-norm Gaussian embeddings, T distinct tokens per sample)
    above DENSE_MAX_P pairs is run on the dense block with the dense -log gradient, and its trajectory
    equals the numpy reference's to 1e-10, plain and normalized."""
    rng = np.random.default_rng(7)
    K, d, n, T = 20, 32, 64, 12
    E = rng.normal(size=(K, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    seqs = [list(rng.choice(K, size=T, replace=False)) for _ in range(n)]
    problem = Problem.create(E, seqs, [int(rng.choice(s)) for s in seqs], "log")
    data = TokenData.from_problem(problem)
    M = problem.gram
    A0 = E @ (0.01 * rng.normal(size=(d, d))) @ E.T
    ints = Packed(A0, data, M).ints
    assert (ints[0], ints[7], ints[8]) == (ints[0], 2, 1) and ints[0] > 48, f"P = {ints[0]}, mode {ints[7]}, dense {ints[8]}"
    cps = np.array([0, 10, 100, 300])
    for normalized in (False, True):
        ref = gd_numpy(A0, data, M, 0.1, cps, normalized)
        _check_run(f"dense gradient, normalized={normalized}", lambda A, c: gd_compiled(A, data, M, 0.1, c, normalized),
                   A0, data, M, 0.1, cps, normalized, problem, ref)


def test_dense_gradient_falls_back_for_a_sample_whose_shifted_sum_underflows():
    """Samples 1 and 2 share the query 2: sample 1 is tokens {0, 2} (scores 0), sample 2 is {1, 2} with
    A[1, 2] = 800.  Shifted by the query's max (800), sample 1's sum is e^-800, below 1e-280: it must take
    the per-sample fallback (its own max shift), which in the dense-state kernel reads the block through the
    entries' block places (sample 0, of query 1, makes them differ from the pair indices).  Forced onto that
    kernel: L(0) is log 2 for samples 0 and 1 over three samples (by hand: the pair-shifted formula alone
    would give inf), and the trajectory equals the numpy reference's."""
    E = np.eye(3)
    problem = Problem.create(E, [[0, 1], [0, 2], [1, 2]], [0, 0, 1], "log")
    data = TokenData.from_problem(problem)
    M = problem.gram
    A0 = np.zeros((3, 3))
    A0[1, 2] = 800.0
    cps = np.array([0, 1, 5, 20])
    with _forced_update("block-dense-gradient"):
        assert Packed(A0, data, M).ints[8] == 1, "precondition: the dense-state kernel is used"
        want = 2 * np.log(2) / 3
        for normalized in (False, True):
            B, L = gd_compiled(A0, data, M, 0.1, cps, normalized)
            assert abs(L[0] - want) <= 1e-15, f"L(0) = {L[0]!r}, expected 2 log(2) / 3 = {want!r}"
            ref = gd_numpy(A0, data, M, 0.1, cps, normalized)
            _check_run(f"underflowing sample, normalized={normalized}",
                       lambda A, c: gd_compiled(A, data, M, 0.1, c, normalized), A0, data, M, 0.1, cps, normalized,
                       problem, ref)


# ------------------------------------------------------------------------------------------------
# Batched == one at a time
# ------------------------------------------------------------------------------------------------
@settings(deadline=None, max_examples=scaled(6))
@given(st.lists(runs(), min_size=1, max_size=4), st.booleans())
def test_batch_equals_one_at_a_time(batch, parallel):
    """gd_batch on problems of mixed K, losses, step sizes and plain/normalized GD returns, for each
    problem, what gd_compiled returns alone (bit for bit: the same kernel runs on the same numbers),
    and what the numpy reference returns (to 1e-10)."""
    ok = []
    for problem, W0, normalized, eta, cps in batch:
        data = TokenData.from_problem(problem)
        A0 = problem.E @ W0 @ problem.E.T
        normalized = normalized and _well_posed(A0, data, problem.gram, eta, cps, normalized)
        ref, err = _numpy_or_error(A0, data, problem.gram, eta, cps, normalized)
        if err is None:
            ok.append((problem, data, A0, normalized, eta, cps, ref))
    if not ok:
        return
    got = gd_batch([r[2] for r in ok], [r[1] for r in ok], [r[0].gram for r in ok], [r[4] for r in ok],
                   [r[5] for r in ok], normalized=[r[3] for r in ok], parallel=parallel)
    for (problem, data, A0, normalized, eta, cps, ref), (B, L) in zip(ok, got):
        B1, L1 = gd_compiled(A0, data, problem.gram, eta, cps, normalized)
        np.testing.assert_array_equal(B, B1, err_msg=f"batch vs single, problem file: {problem.to_json()}")
        np.testing.assert_array_equal(L, L1, err_msg=f"batch vs single, problem file: {problem.to_json()}")
        # B is bit for bit gd_compiled's (above), so the single kernel stands in for the step-by-step check.
        _check_run("batched vs numpy", lambda A, c: gd_compiled(A, data, problem.gram, eta, c, normalized),
                   A0, data, problem.gram, eta, cps, normalized, problem, ref)


# ------------------------------------------------------------------------------------------------
# Collapsing equal samples
# ------------------------------------------------------------------------------------------------
def _uncollapsed(problem: Problem) -> TokenData:
    """One row per sample, weight 1/n: the problem before equal samples are merged."""
    return TokenData(counts=problem.counts.copy(), queries=problem.queries, labels=problem.label_array,
                     weights=np.full(problem.n, 1.0 / problem.n), H=problem.H, loss=problem.loss,
                     biorthogonal=problem.assumptions()["head_biorthogonal"])


@settings(deadline=None)
@given(runs(losses=st.sampled_from(["log", "square"])), st.data())
def test_collapsed_duplicates_same_trajectory(run, data):
    """Repeating samples (and reordering their tokens) changes nothing but the weights: the engine on the
    collapsed problem follows the numpy reference on the uncollapsed one (one row per sample) to 1e-10."""
    problem, W0, normalized, eta, cps = run
    reps = data.draw(st.lists(st.integers(1, 3), min_size=problem.n, max_size=problem.n), label="repeats")
    perm = data.draw(st.randoms(use_true_random=False), label="order")
    seqs, labels = [], []
    for s, y, r in zip(problem.sequences, problem.labels, reps):
        for _ in range(r):
            body = list(s[:-1])
            perm.shuffle(body)  # positions do not matter without positional encoding; the query stays last
            seqs.append(body + [s[-1]])
            labels.append(y)
    big = problem.replace(sequences=seqs, labels=labels)
    collapsed = TokenData.from_problem(big)
    note(f"{big.n} samples collapse to {len(collapsed.weights)}")
    A0 = big.E @ W0 @ big.E.T
    if not _well_posed(A0, collapsed, big.gram, eta, cps, normalized):
        event("normalized GD met a stationary point: compared plain GD")
        normalized = False
    ref, err = _numpy_or_error(A0, _uncollapsed(big), big.gram, eta, cps, normalized)
    if err is not None:
        with pytest.raises(FloatingPointError):
            gd_compiled(A0, collapsed, big.gram, eta, cps, normalized)
        return
    _check_run("collapsed (engine) vs uncollapsed (reference)",
               lambda A, c: gd_compiled(A, collapsed, big.gram, eta, c, normalized),
               A0, _uncollapsed(big), big.gram, eta, cps, normalized, big, ref)


# ------------------------------------------------------------------------------------------------
# Token space maps back to the textbook W-space GD
# ------------------------------------------------------------------------------------------------
def textbook_gd(problem: Problem, W0, eta, steps, normalized, with_min_grad=False):
    """Li et al.'s model as written: X_i (T x d), scores X_i W x_last, softmax over positions,
    f = X_i^T a, u = c_y^T f (or head logits C f for ce), grad_W = (1/n) sum_i X_i^T ds_i x_last^T."""
    E, C = problem.E, problem.C
    W = np.array(W0, dtype=float)
    min_gn = np.inf
    for _ in range(steps):
        grad = np.zeros_like(W)
        for seq, y in zip(problem.sequences, problem.labels):
            X = E[list(seq)]
            q = X[-1]
            s = X @ W @ q
            a = np.exp(s - s.max())
            a /= a.sum()
            f = X.T @ a
            if problem.loss in ("ce", "lsq"):
                z = C @ f
                p = np.exp(z - z.max())
                p /= p.sum()
                py = p[y]
                p[y] -= 1.0
                v = C.T @ p  # ce: dl/dz = p - e_y
                if problem.loss == "lsq":  # l = (1 - p_y)^2: dl/dz = -2 (1 - p_y) p_y (e_y - p)
                    v = C.T @ (2.0 * (1.0 - py) * py * p)
            else:
                u = C[y] @ f
                v = {"log": -1.0 / u if problem.loss == "log" else 0.0, "square": -2.0 * (1.0 - u),
                     "exp": -np.exp(-u)}[problem.loss] * C[y]
            g = X @ v  # dl/da over positions
            ds = a * (g - a @ g)
            grad += np.outer(X.T @ ds, q) / problem.n
        step = eta
        if normalized:
            gn = np.linalg.norm(grad)
            # A stationary point computed position by position leaves ~1e-17 of rounding, which the
            # normalization would blow up to a full step; token space gets the exact 0 there.
            step = eta / gn if gn > 1e-12 else 0.0
            min_gn = min(min_gn, gn)
        W = W - step * grad
    return (W, min_gn) if with_min_grad else W


@settings(deadline=None)
@given(problems(heads=st.just("default")), st.booleans(), st.integers(1, 12), st.floats(0.01, 0.3))
def test_token_space_is_textbook_W_space(pw, normalized, steps, eta):
    """W(tau) = W(0) - E^T B(tau) E from the engine equals a textbook per-sample T x d GD in W space
    (its own softmax over positions, gradient and Frobenius normalization) to 1e-10."""
    problem, W0 = pw
    data = TokenData.from_problem(problem)
    E = problem.E
    A0 = E @ W0 @ E.T
    W_text, min_gn = textbook_gd(problem, W0, eta, steps, normalized, with_min_grad=True)
    if normalized and min_gn < 1e-8:
        # At a (near-)stationary point the normalized step is eta times a direction made of rounding
        # (seen: a ce sample whose two tokens get identical gradients); compare plain GD there instead.
        event("normalized GD met a stationary point: compared plain GD")
        normalized = False
        W_text = textbook_gd(problem, W0, eta, steps, normalized)
    try:
        B, _ = gd_compiled(A0, data, problem.gram, eta, [0, steps], normalized)
    except FloatingPointError:
        return  # -log u with u <= 0 is not defined in W space either
    W_engine = W0 - E.T @ B[-1] @ E
    _check("W(tau): textbook W-space GD vs engine", W_text, W_engine, problem)


# ------------------------------------------------------------------------------------------------
# Dispatch and early stop (examples)
# ------------------------------------------------------------------------------------------------
def _svm_zero_problem():
    # One query (2), labels 0 and 2 each present with the other: one SCC {0, 2}, W^svm = 0, a finite minimizer.
    E = np.eye(3)
    return Problem.create(E, [[0, 2], [0, 2], [1, 0, 2]], [0, 2, 0])


def test_run_gd_engines_agree_and_reject_unknown_names():
    """run_gd: numpy, compiled and auto give the same iterates; an unknown engine name is a ValueError."""
    problem = _svm_zero_problem()
    data = TokenData.from_problem(problem)
    A0 = np.zeros((3, 3))
    out = {e: run_gd(A0, data, problem.gram, 0.5, [0, 10, 100], False, e) for e in ("numpy", "compiled", "auto")}
    for e in ("compiled", "auto"):
        _check(f"B(tau), {e} vs numpy", out["numpy"][0], out[e][0], problem)
        _check(f"L(tau), {e} vs numpy", out["numpy"][1], out[e][1], problem)
    with pytest.raises(ValueError, match="unknown engine"):
        run_gd(A0, data, problem.gram, 0.5, [0, 1], False, "torch")


# The path each forced mode selects on a -log problem under Assumption 1: Packed.ints[7] (update mode) and
# ints[8] (dense gradient).
_FORCED_PATH = {"kmat": (UPDATE_KMAT, 0), "sparse": (UPDATE_SPARSE, 0), "block": (UPDATE_BLOCK, 0),
                "block-dense-gradient": (UPDATE_BLOCK, 1)}


@pytest.mark.parametrize("mode", [None, *_forced_update.SETTINGS])
def test_early_stop_at_gradient_tolerance(mode):
    """With W^svm = 0 plain GD converges to a finite minimizer; with ``tol`` the engine stops at the first
    step whose ||grad_W L||_F (recomputed here with theory.li2024.losses) is below tol, not before -- on the path
    the engine picks and on each forced one (each kernel has its own stopping code: the stop falls between
    checkpoints, so the loss is re-evaluated at the stopping state)."""
    problem = _svm_zero_problem()
    data = TokenData.from_problem(problem)
    E, M = problem.E, problem.gram
    tol = 1e-4
    with _forced_update(mode) if mode else nullcontext():
        used = Packed(np.zeros((3, 3)), data, M).ints
        assert mode is None or (used[7], used[8]) == _FORCED_PATH[mode], f"{mode}: path {used[7]}, {used[8]}"
        B, L, step = gd_compiled(np.zeros((3, 3)), data, M, 1.0, [0, 10, 10**6], tol=tol, return_steps=True)
    assert step < 10**6, "did not stop"
    _, G = loss_and_grad_scores(-M @ B[-1] @ M, data)
    assert np.linalg.norm(E.T @ G @ E) < tol
    full, Lfull = gd_numpy(np.zeros((3, 3)), data, M, 1.0, [step - 1, step])
    _, G_prev = loss_and_grad_scores(-M @ full[0] @ M, data)
    assert np.linalg.norm(E.T @ G_prev @ E) >= tol, "stopped later than the first step below tol"
    _check("B at the stop vs the reference", full[1], B[-1], problem)
    _check("L at the stop vs the reference", Lfull[1], L[-1], problem)


# ------------------------------------------------------------------------------------------------
# Calibration of the step-by-step fallback (_check_run)
# ------------------------------------------------------------------------------------------------
def _overshoot_case():
    """Stress seed 1329999067 (see AMPLIFIED): normalized GD from W = 0, eta = 1/32, 40 steps."""
    big = Problem.load("examples/engine_normalized_overshoot.json")
    return big, TokenData.from_problem(big), _uncollapsed(big), np.zeros((big.K, big.K)), 1 / 32, np.array([0, 1, 13, 20, 40])


def test_overshooting_normalized_run_is_judged_step_by_step():
    """The case's whole trajectories differ by more than TOL (engine on collapsed samples, reference on
    the uncollapsed ones), the reference moves by more than AMPLIFIED under its probe, and every step
    agrees: the property passes.  A planted engine with a step 1e-9 too long, or one whose loss is off
    by 1e-9, fails there; so does the planted step on a plain-GD run of the same problem (no fallback)."""
    big, collapsed, unc, A0, eta, cps = _overshoot_case()
    M = big.gram
    ref = gd_numpy(A0, unc, M, eta, cps, True)
    B, _ = gd_compiled(A0, collapsed, M, eta, cps, True)
    assert np.abs(B - ref[0]).max() > TOL, "the case is about whole trajectories that differ"
    assert _rounding_drift(A0, unc, M, eta, cps, True, ref) > AMPLIFIED
    _check_run("engine", lambda A, c: gd_compiled(A, collapsed, M, eta, c, True), A0, unc, M, eta, cps, True, big, ref)

    def long_step(A, c):
        return gd_compiled(A, collapsed, M, eta * (1 + 1e-9), c, True)

    def loss_off(A, c):
        Bx, Lx = gd_compiled(A, collapsed, M, eta, c, True)
        return Bx, Lx + 1e-9

    for planted in (long_step, loss_off):
        with pytest.raises(AssertionError):
            _check_run("planted", planted, A0, unc, M, eta, cps, True, big, ref)
    plain = gd_numpy(A0, unc, M, eta, cps, False)
    with pytest.raises(AssertionError, match=r"B\(tau\)"):
        _check_run("planted, plain GD", lambda A, c: gd_compiled(A, collapsed, M, eta * (1 + 1e-8), c, False),
                   A0, unc, M, eta, cps, False, big, plain)
