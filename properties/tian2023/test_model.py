"""Reference implementation of Tian et al. 2023 (theory/tian2023/model.py) and its strategies.

* the SGD path (finite T, finite batch) agrees with the long-sequence limit (Lemma 2) within a stated,
  T-dependent tolerance, and its finite-T part (same classes per batch) shrinks at least like 1/sqrt(T); the discrete limit agrees with the ODE;
* gradients (Lemma 1) match central finite differences; the per-class sparse path matches the dense one;
* the tied decoder (Lemma 3) coincides with the free one while Z is frozen;
* the integrator's step-halving check accepts accurate runs and raises on inaccurate ones; the distinct-token
  entropy's certified error covers the entropy's actual integration error and is attained, within its factor
  2, by a worst-case perturbation of ``Z``;
* the compiled integrator and population GD (numba) agree with the numpy reference to 1e-10 relative;
* the strategies generate what they promise; invalid parameters raise ValueError.

Replay a failure: ``.venv/bin/python -m pytest properties/tian2023/test_model.py -k NAME`` (the ci profile is
derandomized; under ``stress`` Hypothesis prints the ``@reproduce_failure`` blob).
"""
from __future__ import annotations

import argparse
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reports.record import record_inputs, record_metrics
from strategies.scansnap import probabilities, sequence_classes, single_common_classes, weak_correlation
from theory.tian2023.model import (IntegrationError, ScanSnapError, c_limit, forward_grads, forward_grads_by_class,
                             integrate, make_classes, mean_distinct_entropy, mean_distinct_entropy_error, population_gd,
                             population_loss_grads, sample_counts, snap_time_estimate, syn_layout, train_sgd)

pytestmark = pytest.mark.theorem("Scan and Snap")
FEW = max(2, settings.default.max_examples // 3)

# SGD vs limit: the finite-T bias of E[LN(h)] is O(1/T) and the sampling noise O(1/sqrt(B T)); with
# T = 2000, B = 256 the measured gap is ~1% of |Z|.  Stated tolerance: 4% of max|Z| + 5e-3 absolute (the
# noise does not scale with |Z|: the stress profile found a gap of 4.9e-3 at max|Z| = 0.08).  T = 4
# misses it by 16x (gap 0.247 against 0.015).
AGREE_REL, AGREE_ABS = 0.04, 5e-3


FINITE_T_SHRINK = 4.0  # see test_sgd_long_sequences_agree_with_the_limit


def _sgd_Z(classes, T, seed, steps=60, eta=0.2, batch=256):
    return train_sgd(classes, steps=steps, eta_y=eta, eta_z=eta, batch=batch, T=T, seed=seed).Z[0]


def _limit_Z(classes, steps=60, eta=0.2):
    return population_gd(classes, steps=steps, eta_y=eta, eta_z=eta)[1]


def _gap(classes, T, seed):
    Zg = _limit_Z(classes)
    return float(np.max(np.abs(_sgd_Z(classes, T, seed) - Zg))), float(np.max(np.abs(Zg)))


def _finite_T_gaps(classes, Ts, seed, Z=None):
    """``max |Z_SGD(T) - Z_SGD(inf)|`` for each T, the same classes in every batch (runs in ``Z`` reused)."""
    Z = dict(Z or {})
    for T in (*Ts, math.inf):
        if T not in Z:
            Z[T] = _sgd_Z(classes, T, seed)
    return [float(np.max(np.abs(Z[T] - Z[math.inf]))) for T in Ts]


@settings(deadline=None, max_examples=FEW)
@given(classes=sequence_classes(classes=st.integers(2, 3), distinct=st.integers(1, 3), common=st.integers(1, 2)),
       seed=st.integers(0, 2**16))
def test_sgd_long_sequences_agree_with_the_limit(classes, seed):
    """SGD at T = 2000 is within the stated tolerance of the limit, and its finite-T part shrinks with T.

    Rate-aware criterion, with the classes of every batch shared (train_sgd draws classes and tokens from
    separate streams): the gap ``|Z_SGD(T) - Z_SGD(T = inf)|`` is token noise O(1/sqrt(B T)) plus bias
    O(1/T), so growing T 250x shrinks it at least sqrt(250) = 16x where noise dominates and ~250x where bias
    does.  Stated: at least FINITE_T_SHRINK = 4x; 150 drawn cases measured 19x to 1300x (median 128x).  A
    T that barely grows fails it (``test_finite_T_criterion_rejects_a_T_that_barely_grew``).  The earlier
    criterion compared each T against population GD, a gap that also holds the batch's class-sampling noise
    (no finite-T effect): stress seed 1981322564 found T = 8 at 0.0072 and T = 2000 at 0.0113 on a class pair
    whose T = 8 bias is below that noise."""
    record_inputs(M=classes.M, classes=classes.K, T=2000)
    Z2000 = _sgd_Z(classes, 2000, seed)
    Zg = _limit_Z(classes)
    gap_long, scale = float(np.max(np.abs(Z2000 - Zg))), float(np.max(np.abs(Zg)))
    assert gap_long <= AGREE_REL * scale + AGREE_ABS, f"SGD(T=2000) vs limit: {gap_long:.4g} > tolerance"
    short, long_ = _finite_T_gaps(classes, (8, 2000), seed, Z={2000: Z2000})
    record_metrics(gap_T2000=gap_long, scale=scale, finite_T_gap_8=short, finite_T_gap_2000=long_)
    assert long_ * FINITE_T_SHRINK <= short, (
        f"finite-T gap did not shrink {FINITE_T_SHRINK:g}x when T grew 250x: T=8 {short:.4g}, T=2000 {long_:.4g}")


def test_finite_T_criterion_rejects_a_T_that_barely_grew():
    """Calibration of FINITE_T_SHRINK: T = 8 -> 9 leaves the finite-T gap nearly as it was, and fails it."""
    rejected = 0
    for seed in range(5):
        short, long_ = _finite_T_gaps(syn_layout(1, 2, 3, 4), (8, 9), seed)
        rejected += long_ * FINITE_T_SHRINK > short
    assert rejected == 5, f"the criterion accepted T = 8 -> 9 in {5 - rejected} of 5 seeds"


def test_agreement_tolerance_is_calibrated():
    """The tolerance is tight enough to reject short sequences (T=4: the O(1/T) bias dominates)."""
    classes = syn_layout(1, 2, 3, 4)
    gap, scale = _gap(classes, 4, seed=0)
    record_metrics(gap_T4=gap, scale=scale)
    assert gap > AGREE_REL * scale + AGREE_ABS


def test_discrete_limit_converges_to_the_ode():
    """Population GD with step eta after k steps vs the ODE at t = k eta: Euler's O(eta) error."""
    classes = syn_layout(1, 2, 3, 4)
    errs = []
    for eta in (0.2, 0.05):
        k = int(round(20 / eta))
        _, Zg = population_gd(classes, steps=k, eta_y=eta, eta_z=eta)
        tr = integrate(classes, 20.0, eta_y=1.0, eta_z=1.0, n_eval=4)
        errs.append(float(np.max(np.abs(Zg - tr.Z[-1]))))
    record_metrics(euler_err_02=errs[0], euler_err_005=errs[1])
    assert errs[1] < errs[0] / 2.5, f"Euler error not first order: {errs}"   # 4x smaller step -> ~4x error
    assert errs[1] < 5e-3


@settings(deadline=None)
@given(classes=sequence_classes(classes=st.integers(2, 3), queries=st.integers(1, 2)),
       seed=st.integers(0, 2**16), scale=st.sampled_from([0.0, 0.3, 1.0]))
def test_gradients_match_finite_differences(classes, seed, scale):
    record_inputs(M=classes.M, classes=classes.K)
    rng = np.random.default_rng(seed)
    M = classes.M
    Y, Z = rng.normal(0, scale + 0.1, (M, M)), rng.normal(0, scale, (M, M))
    _, dY, dZ = population_loss_grads(Y, Z, classes)
    eps = 1e-6
    for G, which in ((dY, 0), (dZ, 1)):
        for _ in range(8):
            i, j = rng.integers(M), rng.integers(M)
            A = [Y.copy(), Z.copy()]
            B = [Y.copy(), Z.copy()]
            A[which][i, j] += eps
            B[which][i, j] -= eps
            num = (population_loss_grads(*A, classes)[0] - population_loss_grads(*B, classes)[0]) / (2 * eps)
            assert abs(num - G[i, j]) <= 1e-6 * (1 + abs(num)), f"{'YZ'[which]}[{i},{j}]: {G[i, j]} vs {num}"
    # sampled sequences: the per-class support path equals the dense path
    labels, counts = sample_counts(rng, classes, 9, 6)
    w = np.full(9, 1 / 9)
    a = forward_grads(Y, Z, counts, classes.query[labels], classes.next_token[labels], w, want_loss=True)
    b = forward_grads_by_class(Y, Z, counts, labels, classes, w)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)


@settings(deadline=None, max_examples=FEW)
@given(classes=sequence_classes())
def test_tied_decoder_equals_free_decoder_while_attention_is_frozen(classes):
    """Lemma 3: with eta_Z = 0, F is constant and Y(t) = F W(t) exactly."""
    record_inputs(M=classes.M, classes=classes.K)
    free = integrate(classes, 50.0, eta_y=2.0, eta_z=0.0, decoder="free", n_eval=4)
    tied = integrate(classes, 50.0, eta_y=2.0, eta_z=0.0, decoder="tied", n_eval=4)
    np.testing.assert_allclose(tied.Y(-1), free.Y(-1), atol=1e-6, rtol=1e-6)
    assert np.max(np.abs(free.Y(-1))) > 0.1          # the decoder did learn


def test_integrator_error_check_is_honest_and_raises():
    classes = syn_layout(1, 2, 2, 3)
    tr = integrate(classes, 200.0, eta_y=3.0, eta_z=1.0, rtol=1e-6, atol=1e-8, n_eval=5)
    ref = integrate(classes, 200.0, eta_y=3.0, eta_z=1.0, rtol=1e-9, atol=1e-11, n_eval=5, steps_per_unit=512)
    err = float(np.max(np.abs(tr.Z - ref.Z)))
    record_metrics(accepted_error=err, estimate=tr.error_estimate)
    assert err <= 10 * (1e-8 + 1e-6 * np.max(np.abs(ref.Z)))
    with pytest.raises(IntegrationError, match="step-halving"):
        integrate(classes, 200.0, eta_y=3.0, eta_z=1.0, steps_per_unit=1, max_halvings=0, rtol=1e-12, atol=1e-14)


@settings(deadline=None, max_examples=FEW)
@given(classes=sequence_classes(classes=st.integers(2, 3), distinct=st.integers(2, 4), common=st.integers(1, 3),
                                common_everywhere=st.just(True)),
       eta_y=st.sampled_from([1.0, 4.0]))
def test_entropy_error_bound_covers_the_integration_error(classes, eta_y):
    """The Theorem 4 rate comparison trusts ``mean_distinct_entropy_error``: the entropy from the accepted
    (rtol 1e-6) run must be within that bound of the entropy from a 1e-10 run.  The integrator is usually far
    more accurate than its tolerance (measured: errors ~1e-13 against bounds ~1e-7), so this checks that the
    bound rests on the integrator's contract; its tightness is checked by the perturbation tests below."""
    t_end = 300 * snap_time_estimate(classes, 1.0)
    tr = integrate(classes, t_end, eta_y=eta_y, eta_z=1.0, decoder="tied", n_eval=4, rtol=1e-6, atol=1e-8)
    ref = integrate(classes, t_end, eta_y=eta_y, eta_z=1.0, decoder="tied", n_eval=4, rtol=1e-10, atol=1e-12,
                    max_halvings=8, steps_per_unit=1024)
    err = abs(mean_distinct_entropy(tr.c(), classes) - mean_distinct_entropy(ref.c(), classes))
    bound = mean_distinct_entropy_error(tr.Z[-1], classes, rtol=1e-6, atol=1e-8)
    bound_ref = mean_distinct_entropy_error(ref.Z[-1], classes, rtol=1e-10, atol=1e-12)
    record_inputs(M=classes.M, classes=classes.K, eta_y=eta_y)
    record_metrics(entropy_error=err, bound=bound)
    assert err <= bound + bound_ref, f"entropy error {err:.3g} above its certified bound {bound:.3g}"


@pytest.mark.parametrize("scale", [1e-3, 1.0, 5.0])
def test_entropy_error_bound_is_attained_by_a_worst_case_perturbation(scale):
    """One query per class, so each class's logits can be moved by ``atol + rtol |z|`` with the sign of
    ``dH/dz``: the entropy then moves by the bound's first-order term, which the bound exceeds only by its
    second-order and rounding terms (a bound more than 2.2x the attained move would be loose)."""
    classes = syn_layout(n_queries=2, per_query=1, n_common=2, n_distinct=4)
    rng = np.random.default_rng(7)
    Z = scale * rng.standard_normal((classes.M, classes.M))
    rtol, atol = 1e-6, 1e-8
    bound = mean_distinct_entropy_error(Z, classes, rtol=rtol, atol=atol)
    Zp = Z.copy()
    for n in range(classes.K):
        m, dist = classes.query[n], classes.distinct_tokens(n)
        p = c_limit(Z, classes)[n, dist]
        p = p / p.sum()
        dH = -p * (np.log(p) + (-(p * np.log(p)).sum()))
        Zp[m, dist] += np.sign(dH) * (atol + rtol * np.abs(Z[m, dist]))
    moved = mean_distinct_entropy(c_limit(Zp, classes), classes) - mean_distinct_entropy(c_limit(Z, classes), classes)
    record_metrics(moved=moved, bound=bound)
    assert 0 < moved <= bound, (moved, bound)
    assert moved >= bound / 2.2, f"bound {bound:.3g} is loose: a worst-case perturbation moved H by {moved:.3g}"


@pytest.mark.parametrize("n_distinct", [2, 5, 7])
def test_entropy_error_bound_covers_second_order_at_uniform_attention(n_distinct):
    """Equal distinct probabilities and ``Z = 0``: the attention on the distinct tokens is uniform, the
    entropy is at its maximum ``ln n`` and its first derivative vanishes, so a bound of the first-order term
    alone is 0.  Moving one logit by ``+ε`` and the others by ``-ε`` lowers the entropy by ``O(ε²)``; the
    bound must cover that, and must exceed 0 at ``ε = 0`` (float64 rounding of the entropy)."""
    classes = syn_layout(n_queries=2, per_query=1, n_common=1, n_distinct=n_distinct, distinct_low=0.3,
                         distinct_high=0.3)
    Z = np.zeros((classes.M, classes.M))
    h0 = mean_distinct_entropy(c_limit(Z, classes), classes)
    assert abs(h0 - math.log(n_distinct)) < 1e-14
    assert mean_distinct_entropy_error(Z, classes, rtol=0.0, atol=0.0) > 0, "no rounding floor"
    for eps in (1e-8, 1e-5, 1e-3):
        Zp = Z.copy()
        for n in range(classes.K):
            m, dist = classes.query[n], classes.distinct_tokens(n)
            Zp[m, dist] = -eps
            Zp[m, dist[0]] = eps
        moved = abs(mean_distinct_entropy(c_limit(Zp, classes), classes) - h0)
        bound = mean_distinct_entropy_error(Z, classes, rtol=0.0, atol=eps)
        record_metrics(**{f"moved_{eps:g}": moved, f"bound_{eps:g}": bound})
        assert moved <= bound, f"eps {eps:g}: the entropy moved {moved:.3g}, above its bound {bound:.3g}"


@settings(deadline=None, max_examples=FEW)     # the numpy reference is the slow side (~0.3 s a run)
@given(classes=sequence_classes(classes=st.integers(2, 4), queries=st.integers(1, 2), distinct=st.integers(1, 3),
                                common=st.integers(0, 2)),
       decoder=st.sampled_from(["free", "tied"]), ratio=st.sampled_from([1.0, 10.0]),
       scale=st.sampled_from([0.0, 0.5]), seed=st.integers(0, 2**16))
def test_compiled_integrator_agrees_with_numpy(classes, decoder, ratio, scale, seed):
    """Same step plan, same RK4 stages: only reductions and exp/log round differently (~1e-15 per step).
    Tolerance: 1e-10 relative to max(1, |x|) -- entries that stay 0 in exact arithmetic carry ~1e-15 of
    rounding noise in both paths, which no relative test can compare; the integrator certifies 1e-8 + 1e-6 |x|."""
    record_inputs(M=classes.M, classes=classes.K, ratio=ratio)
    rng = np.random.default_rng(seed)
    M, K = classes.M, classes.K
    init = dict(Z0=rng.normal(0, scale, (M, M)))
    init["Y0" if decoder == "free" else "W0"] = rng.normal(0, scale, (M, M) if decoder == "free" else (K, M))
    # coarse steps and a loose tolerance keep the numpy side cheap: this compares arithmetic, not accuracy
    kw = dict(eta_y=ratio, eta_z=1.0, decoder=decoder, n_eval=8, steps_per_unit=8, rtol=1e-3, atol=1e-5,
              max_halvings=8, **init)
    a = integrate(classes, 30.0, engine="numpy", **kw)
    b = integrate(classes, 30.0, engine="compiled", **kw)
    assert a.steps == b.steps and a.Z.shape == b.Z.shape and a.D.shape == b.D.shape
    for x, y in ((a.Z, b.Z), (a.D, b.D)):
        err = float(np.max(np.abs(x - y)) / max(np.max(np.abs(x)), 1.0))
        record_metrics(relative_difference=err)
        assert err <= 1e-10, f"compiled vs numpy integrator: {err:.3g} relative to max(1, |x|)"
    assert abs(a.error_estimate - b.error_estimate) <= 1e-6 * max(1.0, a.error_estimate)
    Y0, Z0 = rng.normal(0, scale, (M, M)), rng.normal(0, scale, (M, M))
    for mom in (0.0, 0.9):
        ga = population_gd(classes, steps=50, eta_y=ratio * 0.1, eta_z=0.1, momentum=mom, Y0=Y0, Z0=Z0, engine="numpy")
        gb = population_gd(classes, steps=50, eta_y=ratio * 0.1, eta_z=0.1, momentum=mom, Y0=Y0, Z0=Z0,
                           engine="compiled")
        for x, y in zip(ga, gb):
            assert np.max(np.abs(x - y)) <= 1e-10 * max(np.max(np.abs(x)), 1.0)


# ---------------------------------------------------------------------------------------------- strategies


@given(classes=sequence_classes(classes=st.integers(2, 5), queries=st.integers(1, 3), distinct=st.integers(1, 4),
                                common=st.integers(0, 3), permute=st.booleans()))
def test_sequence_classes_strategy_delivers_its_promises(classes):
    record_inputs(M=classes.M, classes=classes.K)
    assert 2 <= classes.K <= 5
    np.testing.assert_allclose(classes.P.sum(axis=1), 1.0)
    assert len(set(classes.next_token.tolist())) == classes.K
    assert 1 <= len(set(classes.query.tolist())) <= 3
    assert len(classes.common_tokens) <= 3
    assert all(len(classes.distinct_tokens(n)) >= 1 for n in range(classes.K))
    assert 0.0 <= weak_correlation(classes) <= classes.K


@given(classes=sequence_classes(distinct=st.integers(2, 4), separated=1.3))
def test_separated_probabilities_are_separated(classes):
    for n in range(classes.K):
        p = classes.P[n, classes.distinct_tokens(n)]
        assert np.all(p[1:] >= 1.3 * p[:-1] * (1 - 1e-12))


@given(classes=single_common_classes())
def test_single_common_strategy_has_exactly_one_common_token(classes):
    assert len(classes.common_tokens) == 1
    assert (classes.P[:, classes.common_tokens[0]] > 0).sum() >= 2


def test_strategies_shrink_to_the_smallest_layout():
    from hypothesis import find
    smallest = find(sequence_classes(), lambda c: True)
    assert smallest.K == 2 and smallest.M == 2 and len(smallest.common_tokens) == 0
    assert find(probabilities(), lambda p: True) == 0.1


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("call", [
    lambda: make_classes([[1, -1]]),
    lambda: make_classes([[0, 0], [1, 0]]),
    lambda: make_classes([[1, 0], [0, 1]], next_token=[0, 0]),
    lambda: make_classes([[1, 0]], query=[5]),
    lambda: train_sgd(syn_layout(1, 2, 1, 1), steps=1, eta_y=-1, eta_z=1),
    lambda: train_sgd(syn_layout(1, 2, 1, 1), steps=1, eta_y=1, eta_z=1, T=1),
    lambda: train_sgd(syn_layout(1, 2, 1, 1), steps=1, eta_y=1, eta_z=1, momentum=1.5),
    lambda: integrate(syn_layout(1, 2, 1, 1), -1.0, eta_y=1, eta_z=1),
    lambda: integrate(syn_layout(1, 2, 1, 1), 1.0, eta_y=1, eta_z=float("nan")),
    lambda: integrate(syn_layout(1, 2, 1, 1), 1.0, eta_y=1, eta_z=1, decoder="bogus"),
    lambda: integrate(syn_layout(1, 2, 1, 1), 1.0, eta_y=1, eta_z=1, engine="bogus"),
    lambda: syn_layout(0, 2),
])
def test_invalid_parameters_raise_one_line_value_errors(call):
    with pytest.raises(ValueError) as info:
        call()
    assert isinstance(info.value, ScanSnapError) and "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["syn_small", "syn_medium"])
@pytest.mark.parametrize("seeds", [0, -3, 2.5, "x", True])
def test_experiments_reject_bad_seed_counts(name, seeds):
    import theory.tian2023.experiments as ex
    with pytest.raises(ValueError):
        getattr(ex, name)(argparse.Namespace(seeds=seeds, seed=0))


@settings(deadline=None, max_examples=FEW)
@given(classes=sequence_classes(classes=st.integers(2, 3), distinct=st.integers(1, 3), common=st.integers(1, 2)),
       which=st.sampled_from(["eta_y", "eta_z"]), engine=st.sampled_from(["numpy", "compiled"]))
def test_each_learning_rate_moves_only_its_own_layer(classes, which, engine):
    """``η_Y`` drives the decoder ``Y`` and ``η_Z`` the attention ``Z`` (Tian et al., Sec. 4): with one rate 0,
    its layer stays exactly at its start, and the other layer moves -- in population GD and in the dynamics,
    in both engines.  (A swap of the two rates anywhere is caught here.)"""
    rates = {"eta_y": 0.5, "eta_z": 0.5, which: 0.0}
    rng = np.random.default_rng(0)  # a nonzero start: at Y = 0 the attention gets no gradient at all
    Y0, Z0 = rng.normal(size=(classes.M, classes.M)), rng.normal(size=(classes.M, classes.M))
    Y, Z = population_gd(classes, steps=20, engine=engine, Y0=Y0, Z0=Z0, **rates)
    frozen, moving = (Y - Y0, Z - Z0) if which == "eta_y" else (Z - Z0, Y - Y0)
    assert np.all(frozen == 0.0), f"{which}=0 but its layer moved by {np.abs(frozen).max():.3g} (population GD, {engine})"
    assert np.abs(moving).max() > 0, f"the other layer did not move (population GD, {engine})"
    traj = integrate(classes, 2.0, n_eval=3, engine=engine, Y0=Y0, Z0=Z0, **rates)
    frozen, moving = (traj.D, traj.Z) if which == "eta_y" else (traj.Z, traj.D)
    assert np.all(frozen == frozen[0]), f"{which}=0 but its layer moved (dynamics, {engine})"
    assert np.abs(moving[-1] - moving[0]).max() > 0, f"the other layer did not move (dynamics, {engine})"
