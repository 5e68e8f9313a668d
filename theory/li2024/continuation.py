"""Log-time continuation of Li et al.'s GD: the gradient flow from a GD state, to 10^12 steps and beyond.

Why.  Past the transient ``W(τ) ≈ ln(τ/τ₀) W^svm + W^fin + o(1)`` (docs/theory.md, Theorem 1): the gradient,
the curvature and GD's per-step change all decay like ``1/τ``, so late GD is an ever more accurate
explicit-Euler discretization of the gradient flow ``dW/dt = -∇L(W)`` with ``t = η τ``, and in log time
``s = ln t`` that flow is smooth and slow.  An adaptive implicit integrator in ``s`` reaches ``10^12``
steps-equivalent in ~10²-10³ gradient evaluations, where discrete GD must take every step (issue 37).

The engine.
  *Variables.*  As in :mod:`theory.li2024.training`: from the GD state ``W₁`` at step ``τ₁`` (scores
  ``A₁ = E W₁ E^T``), ``W = W₁ - E^T B E`` and ``A = A₁ - M B M`` with ``M = E E^T``, ``dB/dt = G(A)``
  (``G = dL/dA``, :func:`theory.li2024.losses.loss_and_grad_scores`, the saturated form without
  cancellation: the right-hand side is exponentially small late, and that form keeps it exact to a few
  ulps of itself).  ``G`` is zero outside the query columns ``Q``, so the state is ``B[:, Q]`` (``K |Q|``
  numbers), and only ``A[:, Q]`` enters a softmax.
  *Time.*  ``s = ln t``, ``t = η τ``: ``dB_Q/ds = e^s G_Q(A)``.  Late, ``G ~ 1/t`` and the right-hand side
  is O(1)/decade (the W^svm coefficient gains ``||W^svm|| ln 10`` per decade).
  *Stiffness.*  The flow inside the cyclic subspace ``S_fin`` converges like ``e^{-λ t}`` (``L̃`` is
  strongly convex there), i.e. with rate ``λ e^s`` in ``s``: the problem is stiff and grows stiffer by a
  factor 10 per decade.  An explicit method would need ``~t`` steps; LSODA (Adams while non-stiff,
  switching to BDF) or Radau/BDF with the *analytic* Jacobian below take a handful per decade.
  *Jacobian.*  For ``-log u`` under Assumption 1 sample i's ``dl/ds_i = a_i - e_{y_i}`` and its derivative
  in the scores is ``S_i = diag(a_i) - a_i a_i^T`` (the diagonal entry of the most attended token written
  ``a_r · Σ_{j≠r} a_j``, exact when ``a_r`` rounds to 1).  With ``P_k = Σ_{q_i = k} w_i S_i`` and
  ``dA[:, k] = -M dB_Q M[Q, k]``: ``∂(G_Q)[i, k]/∂B_Q[j, l] = -(P_k M)[i, j] M[l, k]``.
  *Tolerances.*  ``RTOL = 1e-10``, ``ATOL = 1e-12`` on the entries of ``B`` (and of the quadrature below).
  Justification: the comparison with GD (below) resolves ``W`` to its GD-vs-flow bound, ~1e-6..1e-8 of
  ``||W||`` over 10^5..10^7 steps, so the integrator must sit at least ~100x under it; ``1e-10`` does, and is
  still ~10^6 ulps, so the error control does not chase rounding.  ``ATOL`` matters only for entries of
  ``B`` that stay near 0.  Late, ``atol`` is raised to the right-hand side's own rounding noise,
  ``eps t`` (:func:`noise_atol`), decade by decade of ``t``; the quadrature ``D`` is not error-controlled for the
  convex loss, and controlled to ``D_RTOL`` of ``D`` for the others (Grönwall's growth, below, solved in ``ln D``), inside
  the implicit solve or, where that stalls, over its accepted states (``_bound``).
  The integrator's error is *measured*, not assumed: ``estimate_error=True``
  solves again at ``rtol/100, atol/100`` and records the difference per checkpoint
  (``integration_error``, in Frobenius units of ``W``).

How far the continuation may stand in for GD (the validity tolerance).  Let ``φ`` be the exact flow from
``W₁`` at ``t₁ = η τ₁``, ``W_k`` GD from the same state, ``e_k = W_k - φ(t_k)``.  Then
``e_{k+1} = [W_k - η g(W_k)] - [φ_k - η g(φ_k)] - ℓ_k`` with the local error
``ℓ_k = φ(t_{k+1}) - φ(t_k) + η g(φ(t_k)) = ∫_{t_k}^{t_{k+1}} [g(φ(t_k)) - g(φ(u))] du``.  Under
Assumptions 1-2 the log loss is convex and β-smooth; for ``η <= 2/β`` the gradient step ``x -> x - η g(x)``
is non-expansive, so ``||e_{k+1}|| <= ||e_k|| + ||ℓ_k||``.  Since ``dg/du = -H g`` along the flow,
``||g(φ(t_k)) - g(φ(u))|| <= ∫_{t_k}^{u} ||H g||``, hence ``||ℓ_k|| <= η ∫_{t_k}^{t_{k+1}} ||H g|| dv`` and, with
``e(τ₁) = 0``,

    ||W_GD(τ) - φ(η τ)||_F  <=  D(τ) = η ∫_{t₁}^{η τ} ||H(φ) g(φ)||_F dt

(a rigorous bound; it is twice the leading term ``(η²/2) Σ ||H g||`` of Euler's global error).  Late,
``||H g|| ~ 1/t²``, so ``D`` converges: the whole future deviation of GD from the flow is of the size of one
GD step at ``τ₁``.  ``H g`` is computed exactly in token space (``dA = M G M``, ``dG[:, k] = P_k dA[:, k]``,
``H g = E^T dG E``) and ``D`` is integrated as one more component of the ODE (``dD/ds = η e^s ||H g||``).  The
continuation's own distance to ``φ`` is ``integration_error`` plus ``rounding_floor`` (``B`` is resolved only to its
absolute tolerance, :func:`noise_atol`, which the error estimate's second solve shares); GD's rounding adds at most ``ρ`` per step
(``gd_rounding``, :func:`gd_rounding_per_step`).  :func:`~theory.li2024.provenance.deviation` is the sum of the three; :func:`compare`
propagates it to the statistics Theorem 1's verdict uses (``properties/li2024/test_continuation.py``).

Scope: plain GD.  The bound above is Theorem 1's setting (the log loss under Assumption 1, whose convexity
makes ``D`` a bound); every other loss and head of the suite carries Grönwall's factor (below).

The decisions' use (:class:`Escalation`).  Theorem 1 (``W^svm != 0`` and ``= 0``) and the automaton escalate
through an :class:`Escalation`: the first budget is discrete GD's; before any later budget is produced by the
continuation, the continuation is run over the last decade GD itself ran (from GD's state at ``τ₁/10`` to
``τ₁``) and every statistic of :func:`compare` must agree with GD's within its derived tolerance.  Where it
does, every later budget, up to ``CONTINUE_MAX_STEPS``, is the continuation's from GD's state at ``τ₁``;
where it does not (or the continuation does not apply), the decision escalates on GD as before, up to GD's
own cap, and each budget's measures say so (``engine``: ``"gd"``, ``"continuation"`` or ``"gd (continuation
disagreed: ...)"``; :func:`~theory.li2024.provenance.engine_measures`).

Section 5 (:mod:`theory.li2024.local_continuation`).  Its losses are not the log loss or its head breaks
Assumption 1: the loss is not convex in ``W`` there, the gradient step is not non-expansive, and ``D`` above
bounds nothing.  For those losses ``D`` carries Grönwall's factor, ``dD/ds = e^s (μ D + η ||H g||) + ρ(s)`` with
``μ = max(0, -λ_min(∇²L))`` at the flow point (:mod:`theory.li2024.curvature`; a first-order bound, measured
against GD by ``properties/li2024/test_local_continuation.py``) and ``ρ`` the right-hand side's own rounding
(``_Flow.rounding_forcing``: amplified by the same factor, it is the whole distance at an unstable point GD's
arithmetic keeps exactly), solved in ``ln D`` (``_LogBound``: an implicit step of the linear form damps its growth), the right-hand side is the numpy one and the
Jacobian is the Hessian of :mod:`theory.li2024.curvature`.  Near a change of selection ``μ`` is large and ``D``
widens by orders of magnitude: the statistics a Section 5 verdict reads then carry that width, and a basin
the bound cannot resolve is not decided.  For the convex loss ``μ = 0`` and nothing changes.
"""
from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import solve_ivp

from theory.core.problem import Problem
from theory.li2024 import shadowing
from theory.li2024.analysis import Analysis
from theory.li2024.curvature import MovementSpace, query_hessians
from theory.li2024.curvature_kernel import nonconvex_jac, nonconvex_rhs
from theory.li2024.engine import LOSS_CODES
from theory.li2024.flow_kernel import flow_rhs
from theory.li2024.losses import EPS, TokenData, attention, loss_and_grad_scores
from theory.li2024.modified_flow import CORRECTION, modified_jacobian, modified_rhs
from theory.li2024.provenance import ContinuationFailed, deviation, engine_label, engine_measures, engine_of
from theory.li2024.training import (Checkpoint, Trajectory, _scc_membership, checkpoint_measures, grad_norm_scores,
                                    log_checkpoints)


__all__ = ["Agreement", "ContinuationCheckpoint", "ContinuationFailed", "ContinuedTrajectory", "Escalation", "bounds_of", "compare", "continue_flow",
           "engine_of", "engine_label", "engine_measures", "deviation", "RTOL", "ATOL", "METHOD", "CONTINUE_MAX_STEPS",
           "EXTENDED_EPS"]

RTOL, ATOL = 1e-10, 1e-12
# The unit roundoff of numpy's longdouble where the platform's is wider than float64 (x86-64: the 80-bit type,
# 1.08e-19), else None: the precision of ``continue_flow(..., extended=True)``'s right-hand side for ``B``.
EXTENDED_EPS = float(np.finfo(np.longdouble).eps) if np.finfo(np.longdouble).eps < EPS else None
# The tolerance on ln D for a non-convex loss (``_LogBound``): a relative tolerance on D.  D is a tolerance on W
# needed to a few per cent.  Late, ``||H g||`` is evaluated on a gradient whose in-SCC entries are exact only to
# ~eps of their O(1) terms (noise_atol): dD/ds carries a noise of ~eps t λ per unit of s, and an error control
# that asks for D more finely chases it (stress seed 777777, ce with a broken head, with D controlled in its
# linear form to 1e-9 absolute: 9 of 680 solves stalled at 10^10-10^11 steps-equivalent, 21 s of the property's
# 45).  At 1e-3 relative (the linear form's) 8 of the nine finished, and decade by decade, where the finer
# solve finished, D was 1.000-1.067 times its value (never smaller by more than 1e-4: the noise the control no
# longer chases is integrated, not dropped); at 1e-2 it was 1.0-1.80 times.
D_RTOL = 1e-3
# A stalled solve raises instead of running on (seen only on the planted defects, whose path leaves the flow's).
MAX_EVALS = 50_000
METHOD = "LSODA"
# LSODA restarts every decade in its non-stiff (Adams) mode and must detect the stiffness again; once it did
# not (examples/theorem1_degenerate_correlation_dip.json from 0.1 N(0, 1) at seed 0: from GD's state at
# 1.6e5 steps it took 50000 evaluations without leaving 1.61e6, where BDF takes 318 evaluations to 1e7).  A
# decade that costs more than SEGMENT_EVALS evaluations is solved again by BDF, as is every later decade.
# Valid decades cost 10-200 evaluations (benchmarks/RESULTS.md, the continuation's table).
SEGMENT_EVALS = 5_000
# A non-convex flow's decade that stalls at a stage is first solved again as two halves (in log time) at the same
# stage, each with its own cap and its own noise floor measured at its start; only where a half stalls does the
# solve move to the next stage.  The decade's ends are arbitrary, and late the error control of ln D meets the
# forcing's sensitivity to B (``_bound``'s docstring): measured on
# examples/section5_square_misalignment_at_the_extension.json in extended precision, the decade from 2e12 to 2e13
# steps-equivalent stalled under LSODA and BDF (5000 evaluations each), and the last stage, D over accepted
# states, read 12.4 there (a spike of the forcing at the decade's last node).  Halved, it took 2255 and 3510
# evaluations and D was 2.0e-3 at 2e13, which resolved the settled misalignment's trend (γ 0.998).  A convex flow's
# stalls (LSODA's missed stiffness, above) go to BDF at once, as before.
SPLIT_STALLED = True
FALLBACK = "BDF"
# BDF's own cap per decade: the same case's last decades cost it 1000-5000 evaluations (its error control
# meets the right-hand side's rounding noise there); beyond this the decade fails (ContinuationFailed).
FALLBACK_EVALS = 20_000
# A non-convex flow's BDF decade gets SEGMENT_EVALS: on stress seed 777777 (Section 5's two properties, 1466
# solves) the fallback finished once, in 4176 evaluations, and stalled 6 times at 20000 (14 s of the
# relaxed-head property's 36; GD's fallback decides those draws as where the continuation is refused).
NONCONVEX_FALLBACK_EVALS = SEGMENT_EVALS
# The decisions' horizon through the continuation (issue 37: at least 10^12 steps-equivalent).  At 10^12 the
# direction's log time L = ln(τ/τ₀) is ~2.4x what 10^7 steps reach on a τ₀ ~ 10 problem (the trend's lever
# ln(L₂/L₁) per decade shrinks like 1/L, so the budgets past it add little power per solve).
CONTINUE_MAX_STEPS = 10**12


@dataclass
class ContinuationCheckpoint(Checkpoint):
    """A :class:`theory.li2024.training.Checkpoint` produced by the continuation (``engine``), with what bounds
    its distance to discrete GD at the same step: ``gd_deviation_bound`` (``D(τ)``, module docstring),
    ``integration_error`` (measured, or None) and ``gd_rounding`` (:func:`gd_rounding_per_step` per step since ``τ₁``)."""
    engine: str = "continuation"
    gd_deviation_bound: float = 0.0
    integration_error: float | None = None
    gd_rounding: float = 0.0
    # The integrator's own floor: B is resolved only to its absolute tolerance, noise_atol (eps t late), which
    # the error estimate's second solve shares and so does not see.  Measured on the late-transit ce draw
    # (benchmarks/bench_modified_flow.py): the second-order continuation was 6.2e-8 from GD at 2e7 steps where
    # D̃ and the estimated integration error summed to 2.6e-8 and GD's own rounding is below 3e-10 (a solve at
    # rtol 1e-12 is within that of it); the floor there, ||E||² sqrt(n) eps t, is 1.6e-7.
    rounding_floor: float = 0.0
    # Where the path bound was integrated (continue_flow's shadow): Grönwall's D and the path bound C
    # (theory.li2024.shadowing: D⊥ + |σ| V, Grönwall's step restarted from it); gd_deviation_bound is the smaller.
    gronwall_bound: float | None = None
    shadowing_bound: float | None = None


@dataclass
class ContinuedTrajectory(Trajectory):
    """A :class:`theory.li2024.training.Trajectory` whose checkpoints past ``continued_from`` come from the
    continuation.  ``evaluations``: right-hand-side evaluations (``nfev``) and Jacobians (``njev``)."""
    continued_from: int = 0
    method: str = METHOD
    rtol: float = RTOL
    atol: float = ATOL
    nfev: int = 0
    njev: int = 0
    continuation_seconds: float = 0.0
    notes: list = field(default_factory=list)
    # Why a partial solve (``continue_flow(..., partial=True)``) ended before its horizon; None when it did not.
    stopped: str | None = None
    # 1: the gradient flow; 2: GD's modified equation (theory.li2024.modified_flow)
    order: int = 1


class _Flow:
    """The right-hand side, its Jacobian and ``||H g||`` in the reduced variables ``B_Q``."""

    def __init__(self, problem: Problem, W1: np.ndarray, eta: float, sign: float = 1.0, compiled: bool = True,
                 order: int = 1, correction: float = CORRECTION, extended: bool = False):
        data = TokenData.from_problem(problem)
        # order 2: GD's modified equation and its bound (theory.li2024.modified_flow), in numpy
        self.order, self.correction = order, correction
        # Theorem 1's setting (the log loss under Assumption 1) is convex: μ = 0, and the compiled kernel applies.
        self.convex = data.loss == "log" and data.biorthogonal
        self.data, self.E, self.M = data, problem.E, problem.gram
        self.K = problem.K
        self.Q = np.array(sorted(set(data.queries.tolist())), dtype=np.int64)
        self.nq = len(self.Q)
        self.qidx = np.searchsorted(self.Q, data.queries)
        self.MQQ = self.M[np.ix_(self.Q, self.Q)]
        self.A1 = self.E @ W1 @ self.E.T
        self.W1 = W1
        self.eta, self.sign = eta, sign
        self.n = self.K * self.nq
        # The unit roundoff of B's right-hand side (continue_flow's extended; :meth:`_extended_rhs`)
        if extended and EXTENDED_EPS is None:
            raise ValueError("continuation: no floating type wider than float64 on this platform "
                             "(numpy's longdouble is float64 here): extended precision is unavailable")
        self.extended = extended
        self.eps = EXTENDED_EPS if extended else EPS
        if extended:
            # The data in the wider type too: the weights (multiplicity / n), the counts (their logs) and the head
            # (the ce loss forms its columns' differences first).  In float64 each of those roundings is a relative
            # eps of an O(1) term, a forcing of ~eps t like G's own (measured against a 40-digit evaluation at
            # 9e12 on examples/section5_converging_at_the_rounding_floor.json: the longdouble right-hand side on
            # float64 data was off by 9.5e-7 and 2.9e-6, eps' t and three times it).
            ld = np.longdouble
            mult = np.rint(data.weights * problem.n)
            self.data_extended = dataclasses.replace(data, counts=data.counts.astype(ld), H=data.H.astype(ld),
                                                     weights=mult.astype(ld) / ld(problem.n))
        self.evals = 0
        self.segment_limit, self.segment_start = MAX_EVALS, 0
        self.fallback_evals = FALLBACK_EVALS if self.convex else NONCONVEX_FALLBACK_EVALS
        # flow_kernel.flow_rhs (convex) or curvature_kernel.nonconvex_rhs and nonconvex_jac: the same arithmetic, compiled
        self.compiled = compiled
        self.space = MovementSpace(self.M, self.Q)
        if not self.convex:
            self.TZ = np.ascontiguousarray(self.space.TZ)
            self.T = np.ascontiguousarray(self.space.T)
            self.code = LOSS_CODES[data.loss]
            self.H = np.ascontiguousarray(data.H, dtype=float)
        # The right-hand side's rounding as a forcing of a non-convex flow's D (rounding_forcing): B's noise per unit
        # of s at the start s0 of the current decade, set by _solve, in Frobenius units of W per entry of B.
        self.to_W = float(np.linalg.norm(self.E, 2) ** 2 * np.sqrt(self.n))
        self.noise_s0, self.noise_at_s0 = 0.0, 0.0
        # (D⊥, σ, C) at the current decade's start when the path bound is integrated (continue_flow's shadow)
        self.shadowing = None

    def scores(self, y):
        A = self.A1.copy()
        A[:, self.Q] -= self.M @ y[:self.n].reshape(self.K, self.nq) @ self.MQQ
        return A

    def full_B(self, y):
        B = np.zeros((self.K, self.K))
        B[:, self.Q] = y[:self.n].reshape(self.K, self.nq)
        return B

    def P(self, A):
        """``P_k = Σ_{q_i = k} w_i (diag a_i - a_i a_i^T)`` (|Q| x K x K), the top diagonal entry cancellation-free:
        the log loss's Hessian in the scores under Assumption 1 (:func:`theory.li2024.curvature.query_hessians`)."""
        return query_hessians(A, self.data, self.Q)

    def rhs(self, s, y):
        self.evals += 1
        if self.evals > self.segment_limit:
            raise _SegmentStall(f"more than {self.segment_limit - self.segment_start} evaluations in one decade")
        if self.evals > MAX_EVALS:
            raise FloatingPointError(f"continuation: more than {MAX_EVALS} evaluations (the integrator stalled)")
        return self._rhs(s, y)

    def rounding_noise(self, s: float, y) -> float:
        """The right-hand side's rounding noise on ``B`` at ``(s, y)``, measured: the largest difference between
        the compiled kernel and its numpy reference (the same arithmetic in two orders), over the state and
        ``NOISE_SAMPLES - 1`` copies of it with each entry of ``B`` moved by a relative ``2^-40`` at most (a fixed
        draw, so a solve replays).

        Why several.  One state's difference is one draw of the rounding pattern, not its scale: on
        ``examples/section5_stall_after_verdict.json`` 16 such copies of the state at the start of the decade
        from 1e8 (flow time) read 0.09 to 58.8 times ``eps t`` (the state itself 34.2), and from 1e10 0.09 to
        89.8 (itself 34.4).  A change of the Jacobian at the 1e-14 level, which moves only the solver's steps,
        moved the single readings at two decade starts to ``eps t`` or below, and the floor with them.  The largest
        of 8 samples read 22-62 times ``eps t`` at the decade starts from 1e5 to 1e10, within 1.7 times the largest
        of 16 other copies (benchmarks/RESULTS.md).  A copy moves ``B`` by ``2^-40``
        relative, far below every tolerance, so it is the same state to the solve."""
        worst = 0.0
        rng = np.random.default_rng(0)
        for j in range(NOISE_SAMPLES):
            z = np.array(y, dtype=float)
            if j:
                z[:self.n] *= 1.0 + rng.uniform(-1.0, 1.0, self.n) * 2.0**-40
            diff = self._noise_at(s, z)
            if not np.isfinite(diff):
                return 0.0  # a state past the loss's domain: refused by the solve itself
            worst = max(worst, diff)
        # In extended precision the same operations run in a type of unit roundoff eps' (:meth:`_extended_rhs`):
        # to first order each rounding, and so their difference, is eps'/eps times float64's.
        return worst * self.eps / EPS

    def _noise_at(self, s: float, y) -> float:
        compiled, self.compiled = self.compiled, True
        extended, self.extended = self.extended, False
        try:
            a = self._first_order_rhs(s, y)
        finally:
            self.compiled, self.extended = compiled, extended
        with np.errstate(invalid="ignore"):
            # B's part of rhs_numpy only: its Hessians (D's part) took most of its time, 8 times a decade
            return float(np.max(np.abs(a[:self.n] - self._b_numpy(s, y)[2])))

    def bound_rates(self, s: float, y) -> tuple[float, float]:
        """``(α, β)`` with ``dD/ds = α D + β`` at the state ``y`` (non-convex flow; :func:`_bound`)."""
        z = np.array(y, dtype=float)
        z[-1] = 0.0
        beta = float(self._rhs(s, z)[-1])
        z[-1] = 1.0
        return float(self._rhs(s, z)[-1]) - beta, beta

    def rounding_forcing(self, s: float) -> float:
        """What the right-hand side's own rounding adds to a non-convex flow's ``dD/ds`` at ``s``:
        ``||E||² sqrt(n) ν e^{s - s0}``, ``ν`` the larger of the noise measured at the decade's start ``s0``
        (:meth:`rounding_noise`) and ``eps e^{s0}`` (``eps t``, :func:`noise_atol`; ``eps`` the right-hand side's
        unit roundoff, ``flow.eps``), grown like ``e^s`` over the decade.

        Why.  The integrator solves the flow with the computed right-hand side ``f + δ``, not ``f``; by Grönwall
        ``δ`` moves the solution from the flow at rate ``||δ||`` amplified by ``e^{∫ μ}``, the same factor as GD's
        local error, so it is a forcing of ``D`` next to ``η ||H g||``.  Where the flow is stable this adds about
        ``eps t`` per unit of ``s``, of the size of the tolerance floor (``rounding_floor``).  At an unstable point
        that GD's arithmetic keeps exactly it is the whole story: an lsq tied-head draw whose GD stays at
        ``||W|| ~ 1e-12`` (``examples/section5_symmetric_saddle.json``), where the continuation's rounding of ``G``
        (~1e-17, the same in the compiled and numpy arithmetic, so absent from their measured difference; it is
        within ``eps`` of ``G``'s O(1) terms) is carried to ``||W|| = 3.9`` within 2.6e4 steps.  Without this
        term GD was 20.7 (first order) and 584 (second) times the bound there; with it (and ``D`` solved in ``ln D``,
        :class:`_LogBound`) 0.17 and 0.14."""
        if self.convex:
            return 0.0
        return self.to_W * self.noise_at_s0 * math.exp(s - self.noise_s0)

    def _rhs(self, s, y):
        if self.order == 2:
            out = modified_rhs(self, s, y, self.correction)
        else:
            out = self._first_order_rhs(s, y)
        if not self.convex:
            out[self.n] += self.rounding_forcing(s)
        return out

    def _first_order_rhs(self, s, y):
        out = self._float_rhs(s, y)
        if self.extended:
            out[:self.n] = self._extended_rhs(s, y)
        return out

    def _extended_rhs(self, s, y) -> np.ndarray:
        """``B``'s right-hand side ``sign e^s G[:, Q]`` with the scores and ``G`` in numpy's longdouble (the numpy
        reference's arithmetic, :func:`theory.li2024.losses.loss_and_grad_scores`, in a wider type).

        Why.  Late, ``G``'s in-SCC entries are sums of O(1) terms that cancel to ``O(1/t)``; each is exact only to
        the unit roundoff, so ``e^s G`` carries a noise ``~eps t`` (:func:`noise_atol`), and so do ``B``'s
        tolerance floor and ``D``'s rounding forcing.  With a large step that noise is the bound: on
        ``examples/section5_converging_at_the_rounding_floor.json`` (ce, η = 4.5) the bound was 0.115 at 2e13
        steps-equivalent and 1.14 at 2e14, nearly all of it ``eps t``, and the direction's rate intervals
        straddled their line.  The x86-64 longdouble's ``eps`` is 1/2048 of float64's.  ``B`` itself stays float64
        (its rounding is ``eps ||B||``, not ``eps t``), and so do ``D``'s rates (an upper bound: noise in
        ``||H g||`` can only raise ``D``)."""
        ld = np.longdouble
        A = self.A1.astype(ld)
        A[:, self.Q] -= self.M.astype(ld) @ np.asarray(y[:self.n], dtype=ld).reshape(self.K, self.nq) \
            @ self.MQQ.astype(ld)
        _, G = loss_and_grad_scores(A, self.data_extended)
        return (self.sign * np.exp(ld(s)) * G[:, self.Q].ravel()).astype(float)

    def _float_rhs(self, s, y):
        if self.compiled and not self.convex:
            d = self.data
            return nonconvex_rhs(np.ascontiguousarray(y, dtype=float), float(s), self.A1, self.M, self.MQQ, self.Q,
                                 self.qidx, d.queries, d.log_counts, d.labels, d.weights, self.H, self.code,
                                 float(self.sign), float(self.eta), self.TZ)
        if self.compiled:
            d = self.data
            return flow_rhs(np.ascontiguousarray(y, dtype=float), float(s), self.A1, self.M, self.MQQ, self.Q,
                            self.qidx, d.queries, d.log_counts, d.labels, d.weights, float(self.sign), float(self.eta))
        return self.rhs_numpy(s, y)

    def rhs_numpy(self, s, y):
        """:meth:`rhs` in numpy (the reference the compiled kernel is tested against; the only one for a
        non-convex loss, where ``dD/ds`` carries Grönwall's ``μ D`` too)."""
        A, G, dB = self._b_numpy(s, y)
        t = np.exp(s)
        out = np.empty(self.n + 1)
        out[:self.n] = dB
        if self.convex:
            out[self.n] = self.eta * t * self.hg_norm(A, G)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):  # a state past the loss's domain: non-finite, refused
                Hq = query_hessians(A, self.data, self.Q)
                out[self.n] = t * (self.eta * self.hg_norm(A, G, Hq) + self.mu(Hq) * y[self.n])
        return out

    def _b_numpy(self, s, y):
        """``(A, G, dB/ds)``: the scores, the gradient in them and ``B``'s right-hand side ``sign e^s G[:, Q]`` at
        ``(s, y)`` in numpy (``B``'s part of :meth:`rhs_numpy`)."""
        A = self.scores(y)
        G = loss_and_grad_scores(A, self.data)[1]
        return A, G, self.sign * np.exp(s) * G[:, self.Q].ravel()

    def mu(self, Hq) -> float:
        """Grönwall's rate ``μ = max(0, -λ_min(∇²L))`` on the directions W moves in (0 for a convex loss)."""
        if self.convex:
            return 0.0
        if not np.all(np.isfinite(Hq)):
            return float("inf")
        return max(0.0, -self.space.least_eigenvalue(Hq))

    def hg_norm(self, A, G, Hq=None):
        """``||H g||_F`` with ``g = E^T G E``: ``dA = M G M``, ``dG[:, k] = P_k dA[:, k]`` (``P_k`` the Hessian in
        the scores' column k: :meth:`P` for the convex loss, ``Hq`` from :mod:`theory.li2024.curvature` otherwise)."""
        P = self.P(A) if Hq is None else Hq
        dA = self.M @ G[:, self.Q] @ self.MQQ  # (M G M)[:, Q] (G is zero outside Q)
        dG = np.zeros((self.K, self.K))
        dG[:, self.Q] = np.einsum("kij,jk->ik", P, dA)
        return grad_norm_scores(dG, self.M)

    def jac(self, s, y):
        if self.order == 2:
            return modified_jacobian(self, s, y, self.correction)
        if not self.convex and self.compiled:
            d = self.data
            return nonconvex_jac(np.ascontiguousarray(y, dtype=float), float(s), self.A1, self.M, self.MQQ, self.Q,
                                 self.qidx, d.queries, d.log_counts, d.labels, d.weights, self.H, self.code,
                                 float(self.sign), self.T, self.TZ)
        A = self.scores(y)
        if not self.convex:
            Hq = query_hessians(A, self.data, self.Q)
            J = np.zeros((self.n + 1, self.n + 1))
            J[:self.n, :self.n] = -self.sign * np.exp(s) * self.space.block(Hq) @ self.space.T
            J[self.n, self.n] = np.exp(s) * self.mu(Hq)
            return J
        PM = self.P(A) @ self.M  # |Q| x K x K
        # J[(i,k),(j,l)] = -(P_k M)[i, j] M[l, k]
        J4 = -np.einsum("kij,lk->ikjl", PM, self.MQQ)
        J = np.zeros((self.n + 1, self.n + 1))
        J[:self.n, :self.n] = self.sign * np.exp(s) * J4.reshape(self.n, self.n)
        return J


class _Solution:
    """The states at the requested points of a segmented solve, and its cost."""

    def __init__(self, y, nfev, njev, methods=METHOD, stopped=None, floor=None, shadowing=None):
        self.y, self.nfev, self.njev, self.methods, self.stopped = y, nfev, njev, methods, stopped
        # the absolute tolerance on B (noise_atol) of the decade that holds each point
        self.floor = np.zeros(y.shape[1]) if floor is None else floor
        # the bound on GD's distance from the flow's path with a time shift (theory.li2024.shadowing), or None
        self.shadowing = shadowing


def gd_rounding_per_step(problem: Problem, wmax: float) -> float:
    """``ρ``: a bound on what one step of the GD engine's rounding moves ``W`` by, ``(K + 2) eps c_E wmax``.

    The engine steps in token space (:mod:`theory.li2024.training`): ``B += s G`` and ``A -= s M G M``, each
    entry rounded to ``eps`` of its own scale and ``M G M`` a ``K``-term sum per entry; ``W = W(0) - E^T B E``.
    A score error ``δA`` is a ``W`` error of at most ``||δA|| / σ_min(E)²`` and a ``B`` error one of
    ``||E||² ||δB||``, so with ``||A||, ||B|| <= ||E||² wmax`` resp. ``wmax / σ_min(E)²`` both are within
    ``c_E = ||E||² / σ_min(E)²`` times ``(K + 2) eps wmax``.  Measured (stress seed 1557241341, a ce problem
    at a stationary point, K = 2, ``c_E`` ~ 1): GD's own rounding moved W by 2.2 eps ||W|| per step, where
    the former charge of ``eps ||W||`` left the continuation's bound 1.5 times short."""
    sv = np.linalg.svd(problem.E, compute_uv=False)
    c_E = float(sv[0] ** 2 / sv[-1] ** 2) if sv[-1] > 0 else float("inf")
    return (problem.K + 2) * EPS * c_E * wmax


def noise_atol(t: float, atol: float = ATOL, measured: float = 0.0, eps: float = EPS) -> float:
    """The absolute tolerance on ``B`` for a solve that reaches flow time ``t``: ``max(atol, eps t, measured)``,
    ``measured`` the right-hand side's rounding noise measured on the problem (``_Flow.rounding_noise``,
    scaled to ``t``).

    Late, the in-SCC entries of ``G`` are sums over samples of O(1) terms that cancel down to ``O(1/t)`` (the
    finite part's equilibrium): each is exact only to ``~eps``, so the right-hand side ``e^s G`` carries a
    rounding noise of ``~eps t`` per unit of ``s``.  No integrator resolves ``B`` below that, and an error
    control that asks for it takes ever smaller steps (measured on ``examples/li_cyclic_trial0.json`` with a
    fixed ``atol = 1e-12``: 5347 evaluations to 10^8 steps, more than a minute to 10^10).  The noise is
    absorbed in the stiff ``S_fin`` directions (a displacement ``~eps/λ``) and adds at most ``~eps t`` to
    ``B`` elsewhere, as GD's own rounding does over as many steps.

    ``eps t`` assumes O(1) terms.  A head that breaks Assumption 1 weights them by ``H``'s entries, and the
    noise is then measured, not assumed: the two arithmetic orders of the right-hand side (the compiled
    kernel and its numpy reference) differed by 10-76 times ``eps t`` from 2e7 to 2e11 steps-equivalent on
    ``examples/section5_stall_after_verdict.json`` (0.03-0.19 times before 2e7), by 16-38 times on another
    broken-head ce draw, and by 0.8-4 times on a biorthogonal-head one; with the ``eps t`` floor alone the
    first two stalled on ``B`` (every stage over its cap) in a late decade.

    ``eps``: the right-hand side's unit roundoff (float64's, or the extended type's: ``_Flow._extended_rhs``).
    """
    return max(atol, eps * t, measured)


# Samples of the right-hand side's rounding noise per decade (_Flow.rounding_noise).
NOISE_SAMPLES = 8


class _SegmentStall(FloatingPointError):
    """One decade took more than its cap of evaluations (SEGMENT_EVALS, ``flow.fallback_evals``), or its
    integrator gave up: the decade is tried again at the next of :data:`STAGES`."""


def _bound(flow: _Flow, path, D0: float, at: np.ndarray) -> tuple[np.ndarray, int]:
    """``(D at the points at, evaluations)``: a non-convex flow's bound over one decade, ``dD/ds = α D + β``
    (``α = e^s μ``, ``β = e^s η ||H g||``), integrated over the accepted steps of ``B``'s solve (``path``: its
    dense output, whose nodes ``path.ts`` are the accepted states).

    Over a step of length ``h`` the equation is solved with ``α``, ``β`` trapezoidal:
    ``D' = D e^{Φ} + h (β₀ e^{Φ} + β₁) / 2``, ``Φ = h (α₀ + α₁) / 2``, every term nonnegative (``D`` never
    falls, the failure of a bound riding uncontrolled on BDF's own formula: measured on a square-loss tied-head
    file, it went negative past 2e10 steps).  Its error is estimated by the same rule over pairs of steps and *added*:
    ``D = max(D_h, D_2h) + |D_h - D_2h|`` at every second node; an output point takes the value of the node at or
    after it (``D`` is nondecreasing, so that is an upper bound).

    Used only where the controlled solve stalls (:data:`STAGES`).  Late, ``||H g||`` is far more sensitive to
    ``B`` than ``B``'s own right-hand side: ``B`` is resolved only to its rounding floor (:func:`noise_atol`,
    ``eps t``), and a displacement of that size in the stiff directions is a real gradient ``~λ eps t`` of the
    displaced state.  At the implicit solver's Newton iterates ``dD/ds`` swung over four orders of magnitude
    where ``D`` did not move (measured on a ce draw of stress seeds 11-55 at 2e9-2e10 steps-equivalent: 1e-9
    to 4.6e-5 at one ``s``, ``D`` = 6.738e-3 to four digits).  ``D``'s row of the Jacobian has no
    ``∂||H g||/∂B``, the Newton iterations failed, and LSODA then BDF stalled: 6 of the 15 Section 5 draws
    left without a verdict over those five seeds; all 6 are decided with this stage, and 5 of their solves
    reach 2e12.  Measured against the controlled solve where that finishes (the five Section 5 example
    files, this stage forced from the first decade): 1.001-1.017 times it to 2e7 steps-equivalent.  Later
    the accepted states carry the same displacement now and then (spikes of ``||H g||`` after a decade's
    restart), and this ``D`` grows where the controlled one stays flat (5.7e-5 against 2.8e-2 at 2e10 on
    ``section5_square_tied_misalignment.json``): it is conservative there, a bound that resolves less, never
    a tighter one.  Nor is ``||H g||`` evaluated between the accepted states: an explicit scheme on the dense
    interpolant read the interpolant's own stiff error and was 7-200 times
    the controlled ``D`` on the same files."""
    ts = np.asarray(path.ts, dtype=float)
    Y = path(ts)
    al, be = np.empty(len(ts)), np.empty(len(ts))
    for k, s in enumerate(ts):
        al[k], be[k] = flow.bound_rates(float(s), Y[:, k])
    if not (np.all(np.isfinite(al)) and np.all(np.isfinite(be))):
        raise FloatingPointError("continuation: the bound's rate is not finite (a state past the loss's domain)")

    def march(idx):
        D = np.empty(len(idx))
        D[0] = D0
        for j in range(1, len(idx)):
            i, k = idx[j - 1], idx[j]
            h = ts[k] - ts[i]
            g = np.exp(0.5 * h * (al[i] + al[k]))
            D[j] = D[j - 1] * g + 0.5 * h * (be[i] * g + be[k])
        return D

    m = len(ts) - 1
    coarse = np.r_[np.arange(0, m - 1, 2), m] if m >= 2 else np.arange(m + 1)
    fine = march(np.arange(m + 1))[coarse]
    rough = march(coarse)
    Dc = np.maximum.accumulate(np.maximum(fine, rough) + np.abs(fine - rough))
    # each output point takes the first coarse node at or after it
    j = np.minimum(np.searchsorted(ts[coarse], at - 1e-12 * np.maximum(1.0, np.abs(at))), len(coarse) - 1)
    return Dc[j], 2 * len(ts)


# The stages a decade is tried in (_solve): (integrator, D's control).  "solve": D controlled inside the implicit
# solve to D_RTOL of D (in ln D, _LogBound); "nodes": D left out of the error control and integrated over the accepted
# states afterwards (_bound).  The "nodes" stages are the non-convex flow's only: a convex D rides on B's steps.
STAGES = ((METHOD, "solve"), (FALLBACK, "solve"), (METHOD, "nodes"), (FALLBACK, "nodes"))


class _LogBound:
    """A non-convex flow's system in ``(B_Q, ln D)`` instead of ``(B_Q, D)``: ``d ln D/ds = α + β / D``.

    Why.  ``dD/ds = α D + β`` (``α = e^s μ``) is an unstable linear equation wherever Grönwall's ``μ`` is large, and
    an implicit step of it with ``h α > 1`` damps or flips it: ``D' = (D + h β) / (1 - h α)``.  The error control
    does not see this while ``D`` is below its absolute tolerance.  Measured at a symmetric saddle GD's
    arithmetic keeps exactly (``examples/section5_symmetric_saddle.json``, ``α`` = 405 per unit of ``s`` at
    2e4 steps): the second-order solve stayed at the saddle and returned ``D̃ = -5.7e-15`` at 2e5 steps where
    Grönwall's factor is beyond ``e^900``; at an exactly stationary ``W = 0`` the first-order one returned
    ``D = -3.94``.  In ``ln D`` the growth ``α`` is a drift no step can damp and ``β / D`` is a stable
    relaxation, so an implicit method integrates both faithfully; ``ln D`` is controlled to ``D_RTOL``
    (a relative tolerance on ``D``).  It cannot fall (``d ln D/ds >= 0``): the linear form's solve had to be
    checked for a falling ``D`` and solved again at the next stage.  It also stopped chasing ``||H g||``'s late
    noise: the six solves on four Section 5 example files whose linear form stalled into the "nodes" stage
    finish in LSODA alone (3913 evaluations to 2e12 where the linear form took 11736, on
    ``examples/section5_bound_noise_stall.json``).

    ``D`` starts from ``max(D(a), D_RTOL β(a))``: ``ln 0`` is not a state, and that seed is what the forcing
    adds over ``D_RTOL`` of log time, so it keeps ``D`` an upper bound and loosens it by about ``D_RTOL`` of
    itself.  Past ``D = 1e300`` (``LOG_D_MAX``) the bound is useless and the solve stops
    (``FloatingPointError``) once an accepted state is there (:func:`_decade`).  A trial state of the integrator
    is not one, and neither is ``ln D`` where it is not controlled (the "nodes" stage of :data:`STAGES`, whose ``D``
    is integrated over the accepted states afterwards): such a state is evaluated with ``ln D`` held at
    ``LOG_D_MAX``.  Measured: the flow of ``examples/section5_escape_past_gds_reach.json`` started again at 2e9
    steps-equivalent from its state moved by 2.2e-4 along its unstable direction stalls LSODA and BDF (5000
    evaluations in its first decade); the "nodes" stage, whose ``ln D`` went to 2.2e5 in a trial step, stopped
    on it, and with it the whole solve."""

    def __init__(self, flow: _Flow):
        self.flow = flow

    def state(self, s: float, y: np.ndarray) -> np.ndarray:
        z = np.array(y, dtype=float)
        z[-1] = 0.0
        beta = float(self.flow.rhs(s, z)[-1])
        z[-1] = np.log(max(float(y[-1]), D_RTOL * beta, np.finfo(float).tiny))
        return z

    def _linear(self, z: np.ndarray) -> np.ndarray:
        y = np.array(z, dtype=float)
        y[-1] = math.exp(min(float(z[-1]), LOG_D_MAX))
        return y

    def rhs(self, s, z):
        y = self._linear(z)
        f = self.flow.rhs(s, y)
        f[-1] /= y[-1]
        return f

    def jac(self, s, z):
        y = self._linear(z)
        J = self.flow.jac(s, y)
        # d/dlnD (α + β e^{-ln D}) = -β / D = α - (α D + β) / D; D's row has no ∂/∂B (as in the linear form)
        J[-1, -1] -= self.flow.rhs(s, y)[-1] / y[-1]
        return J


# ln D past which the bound is useless: D = e^690 ~ 1e300, well inside the floats.
LOG_D_MAX = 690.0


def _decade(flow: _Flow, a: float, b: float, y: np.ndarray, at: np.ndarray, method: str, bound: str,
            rtol: float, atol: float, measured: float = 0.0):
    """One decade ``[a, b]`` from ``y`` by ``method``, ``D`` controlled as ``bound`` says (:data:`STAGES`), with
    ``measured`` the rounding noise at its end (:func:`noise_atol`): ``(solution, evaluations of the bound's
    quadrature)``; raises ``_SegmentStall`` past the decade's cap.  A non-convex flow is solved in ``(B, ln D)``
    (:class:`_LogBound`); the solution returned holds ``D``."""
    tol = np.full(flow.n + 1, noise_atol(float(np.exp(b)), atol, measured, flow.eps))
    # D is a tolerance, needed to a few per cent.  Convex loss: a quadrature of a positive integrand riding on
    # B's steps, not error-controlled.  Non-convex: Grönwall's μ D makes it an exponential growth whose error
    # B's steps do not bound (measured on a square-loss tied-head file: D went negative past 2e10 steps with it
    # uncontrolled), so ln D is controlled to D_RTOL inside the solve, or D over its accepted states.
    tol[-1] = D_RTOL if not flow.convex and bound == "solve" else 1.0
    flow.segment_start = flow.evals
    flow.segment_limit = flow.evals + (flow.fallback_evals if method == FALLBACK else SEGMENT_EVALS)
    # No dense output of every step is needed where D is integrated inside the solve (it cost a quarter of
    # LSODA's per-step time), only the interpolant of the steps that hold an output point; the shadowing bound
    # (theory.li2024.shadowing) is a quadrature over the accepted states, as the "nodes" stage's D is.
    dense = bound == "nodes" or flow.shadowing is not None
    system = None if flow.convex else _LogBound(flow)
    fun, jac, y0 = (flow.rhs, flow.jac, y) if system is None else (system.rhs, system.jac, system.state(a, y))
    # LSODA says why it gave up in a UserWarning only ("lsoda: Repeated convergence failures ..."), its result
    # saying "Unexpected istate": the warning's text goes into the stall's reason, not to the user's console.
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", UserWarning)
        try:
            sol = solve_ivp(fun, (a, b), y0, method=method, t_eval=at, jac=jac, rtol=rtol, atol=tol,
                            dense_output=dense)
        except ValueError as exc:  # BDF's LU of a non-finite Jacobian: a state past the loss's domain
            raise FloatingPointError(f"continuation: {method} failed: {exc}") from None
    if not sol.success:  # the integrator gave up (e.g. LSODA's repeated error-test failures): the next stage
        why = "; ".join(dict.fromkeys(str(w.message).strip() for w in said)) or sol.message
        raise _SegmentStall(f"{method} failed: {why}")
    for w in said:  # a warning of a solve that succeeded is not the integrator's giving up: passed on
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if system is not None:
        if bound == "solve" and np.any(sol.y[-1] > LOG_D_MAX):  # "nodes": D is _bound's, over accepted states
            raise FloatingPointError(f"continuation: the bound D exceeds e^{LOG_D_MAX:.0f} (Grönwall's factor)")
        with np.errstate(over="ignore"):
            sol.y[-1] = np.exp(sol.y[-1])
    used = 0
    if bound == "nodes":
        sol.y[-1], used = _bound(flow, sol.sol, float(y[-1]), at)
    if flow.shadowing is not None:
        ts = np.asarray(sol.sol.ts, dtype=float)
        sol.shadowing, flow.shadowing_end = shadowing.shadow(flow, ts, sol.sol(ts), flow.shadowing, at)
        used += 2 * len(ts)
    return sol, used


def _solve(flow: _Flow, s1: float, s_eval: np.ndarray, method: str, rtol: float, atol: float,
           partial: bool = False) -> _Solution:
    """Integrate decade by decade of ``t`` (each with :func:`noise_atol` at its end).  A decade that stalls
    (SEGMENT_EVALS evaluations) is solved again as two halves at the same stage where the flow is not convex
    (:data:`SPLIT_STALLED`), and where a half or a convex decade stalls, at the next of :data:`STAGES` (BDF with ``flow.fallback_evals``;
    then, for a non-convex flow, BDF with ``D`` integrated over its accepted states), and so is the rest of the
    solve (``methods`` says which ran).  ``method``: the first stage's integrator.  A decade that stalls at
    the last stage, or ends in a non-finite state, raises ``FloatingPointError``; with ``partial`` the
    solution instead holds the points of the decades completed before it and ``stopped`` says why (each
    decade starts from the last one's end, so those points and their ``D`` do not depend on what follows)."""
    stages = [(method, STAGES[0][1])] + [st for st in STAGES[1:] if st != (method, STAGES[0][1])]
    if flow.convex:
        stages = [st for st in stages if st[1] == "solve"]
    y = np.zeros(flow.n + 1)
    out = np.empty((flow.n + 1, len(s_eval)))
    floor = np.zeros(len(s_eval))
    shadowed = np.full(len(s_eval), np.inf) if flow.shadowing is not None else None
    nfev = njev = 0
    last = float(s_eval[-1])
    ends = [b for b in np.arange(s1 + np.log(10.0), last, np.log(10.0)) if b < last - 1e-6] + [last]
    a, done, stage = s1, 0, 0
    methods = [_stage_name(stages[0])]
    decades, split = set(ends), set()  # a decade is halved at most once (SPLIT_STALLED), its halves never
    noise_from = None  # (s, noise): a halved decade's first half starts where it did, from the same state
    i = 0
    while i < len(ends):
        b = ends[i]
        pts = s_eval[(s_eval > a) & (s_eval <= b)]
        if i == len(ends) - 1:
            pts = s_eval[done:]
        # The segment's end is always an output point.
        at = pts if len(pts) and pts[-1] == b else np.append(pts, b)
        stopped = None
        # Measured once per decade (every stage starts from the same state): the noise at its start grows like
        # t over it (e^s G, G's rounding fixed in size).
        noise = noise_from[1] if noise_from is not None and noise_from[0] == a else flow.rounding_noise(a, y)
        noise_from = (a, noise)
        measured = noise * float(np.exp(b - a))
        flow.noise_s0, flow.noise_at_s0 = a, max(noise, flow.eps * float(np.exp(a)))
        while True:
            before = flow.evals
            try:
                sol, used = _decade(flow, a, b, y, at, *stages[stage], rtol, atol, measured)
                break
            except _SegmentStall as exc:
                nfev += flow.evals - before
                if SPLIT_STALLED and not flow.convex and b in decades and b not in split:
                    split.add(b)
                    ends.insert(i, 0.5 * (a + b))
                    sol = None
                    break
                if stage + 1 == len(stages):
                    stopped = f"continuation: {_stage_name(stages[stage])} stalled too ({exc})"
                    break
                stage += 1
                methods.append(_stage_name(stages[stage]))
            except FloatingPointError as exc:  # BDF's LU of a non-finite Jacobian
                nfev += flow.evals - before
                stopped = str(exc)
                break
        if stopped is None and sol is None:  # halved: the first half is solved next, at the same stage
            continue
        if stopped is None and not np.all(np.isfinite(sol.y[:, -1])):
            # e.g. a loss that is infinite past some W (log with a broken head)
            stopped = f"continuation: the state became non-finite by s = {b:.3g}"
        if stopped is not None:
            if not partial:
                raise FloatingPointError(stopped)
            flow.segment_limit = MAX_EVALS
            return _Solution(out[:, :done], nfev, njev, "+".join(methods),
                             f"{stopped}, in the decade to {np.exp(b) / flow.eta:.1e} steps-equivalent", floor[:done],
                             None if shadowed is None else shadowed[:done])
        out[:, done:done + len(pts)] = sol.y[:, :len(pts)]
        floor[done:done + len(pts)] = noise_atol(float(np.exp(b)), atol, measured, flow.eps)
        if shadowed is not None:
            shadowed[done:done + len(pts)] = sol.shadowing[:len(pts)]
            flow.shadowing = flow.shadowing_end
        done += len(pts)
        y = sol.y[:, -1]
        nfev, njev = nfev + int(sol.nfev) + used, njev + int(sol.njev)
        a = b
        i += 1
    flow.segment_limit = MAX_EVALS
    return _Solution(out, nfev, njev, "+".join(methods), floor=floor, shadowing=shadowed)


def _stage_name(stage) -> str:
    return stage[0] if stage[1] == "solve" else f"{stage[0]} (D over accepted states)"


def continue_flow(problem: Problem, traj: Trajectory, steps: int, analysis: Analysis | None = None, *,
                  method: str = METHOD, rtol: float = RTOL, atol: float = ATOL, estimate_error: bool = False,
                  checkpoints=None, sign: float = 1.0, time_scale: float = 1.0,
                  compiled: bool = True, partial: bool = False, order: int = 1,
                  correction: float = CORRECTION, shadow: bool = False, extended: bool = False) -> ContinuedTrajectory:
    """``traj`` (plain GD on ``problem``) continued to ``steps`` steps-equivalent by the gradient flow in log time.

    Parameters
    ----------
    problem : Problem
        The problem ``traj`` was trained on (log loss, Assumption 1).
    traj : Trajectory
        A plain-GD run, at least one step long; the flow starts from its last iterate at ``τ₁ = traj.final.step``.
    steps : int
        The horizon in GD steps (``t = η τ``).
    analysis : Analysis, optional
        As for :func:`theory.li2024.training.train` (the checkpoints' metrics).
    method, rtol, atol : optional
        ``scipy.integrate.solve_ivp``'s (module docstring for the defaults).
    estimate_error : bool
        Solve again at ``rtol/100, atol/100`` and record the difference in ``W`` per checkpoint.
    checkpoints : array_like of int, optional
        Steps to report past ``τ₁``; default those :func:`theory.li2024.training.log_checkpoints` gives past it
        (as :func:`theory.li2024.training.resume` does).
    sign, time_scale : float
        Planted defects for the validity property only (``-1``: the wrong sign of the step; ``2``: the time
        map ``t = t₁ + 2 η (τ - τ₁)``).  Leave them at 1.
    compiled : bool
        The right-hand side from :mod:`theory.li2024.flow_kernel` (default) or its numpy reference (the
        same arithmetic in another order: the two differ by rounding, which can change the integrator's
        steps).
    order : {1, 2}
        1: the gradient flow and its bound ``D`` (module docstring).  2: GD's modified equation and its bound
        ``D̃`` (:mod:`theory.li2024.modified_flow`; numpy only, a few times the cost per evaluation), which
        stays small through a late change of selection where ``D`` does not.
    correction : float
        The modified equation's coefficient (1/2); another value is a planted defect, for the property only.
    shadow : bool
        Also bound GD's distance from the flow's *path* (:mod:`theory.li2024.shadowing`: Grönwall's factor on the
        path's normal space and a time shift), and report the smaller of the two bounds as
        ``gd_deviation_bound`` (each kept as ``gronwall_bound`` and ``shadowing_bound``).  First order, non-convex
        loss only; it costs a quadrature over the solve's accepted states.
    extended : bool
        ``B``'s right-hand side in numpy's longdouble (``_Flow._extended_rhs``), and with it the tolerance floor
        and the rounding forcing at its unit roundoff (``EXTENDED_EPS``, 1/2048 of float64's on x86-64):
        for late budgets at a large step, where ``eps t`` is the bound.  First order only; numpy, 1.5-3.7 times
        the float64 solve's wall time to 2e14 on the Section 5 examples (``benchmarks/bench_extended.py``);
        ``ValueError`` where the platform has no wider type.
    partial : bool
        Where the integrator fails in a later decade (it stalls at every stage, or the state becomes
        non-finite), return the checkpoints of the decades completed before it, with ``stopped`` saying why,
        instead of raising ``FloatingPointError``.  With ``estimate_error`` the checkpoints are those both
        solves reached.

    Returns
    -------
    ContinuedTrajectory
        ``traj``'s checkpoints followed by :class:`ContinuationCheckpoint` s (up to ``steps``, or to where a
        partial solve stopped).
    """
    if traj.normalized:
        raise NotImplementedError("continuation: plain GD only (normalized GD's flow is another equation)")
    tau1 = int(traj.final.step)
    if tau1 < 1:
        raise ValueError("continuation: start from a GD state after at least one step")
    later = log_checkpoints(steps) if checkpoints is None else np.asarray(checkpoints, dtype=np.int64)
    later = np.unique(later[later > tau1])
    base = ContinuedTrajectory(list(traj.checkpoints), traj.eta, False, traj.seconds,
                               continued_from=getattr(traj, "continued_from", tau1) if engine_of(traj.final) != "gd"
                               else tau1, method=method, rtol=rtol, atol=atol, order=order)
    if len(later) == 0:
        return base
    if engine_of(traj.final) != "gd":
        raise ValueError("continuation: start from a GD state (this trajectory already ends in the continuation)")
    eta = traj.eta
    if order not in (1, 2):
        raise ValueError(f"continuation: order is 1 (the gradient flow) or 2 (GD's modified equation), not {order!r}")
    if extended and order != 1:
        raise ValueError("continuation: extended precision is the first-order flow's")
    flow = _Flow(problem, traj.final.W, eta, sign, compiled, order, correction, extended)
    if shadow:
        if order != 1 or flow.convex:
            raise ValueError("continuation: the shadowing bound is the first-order, non-convex flow's")
        flow.shadowing = (0.0, 0.0, 0.0)
    t1 = eta * tau1
    s1 = float(np.log(t1))
    s_eval = np.log(t1 + time_scale * eta * (later.astype(float) - tau1))
    start = time.perf_counter()
    sol = _solve(flow, s1, s_eval, method, rtol, atol, partial)
    nfev, njev = int(sol.nfev), int(sol.njev)
    stopped, reached = sol.stopped, sol.y.shape[1]
    fine = None
    if estimate_error and reached:
        flow.shadowing = None  # the second solve estimates B's error only
        fine = _solve(flow, s1, s_eval[:reached], method, rtol / 100, atol / 100, partial)
        nfev += int(fine.nfev)
        njev += int(fine.njev)
        if fine.y.shape[1] < reached:
            stopped, reached = f"{fine.stopped} (the error estimate's solve)", fine.y.shape[1]
    later = later[:reached]
    seconds = time.perf_counter() - start
    E, M = problem.E, problem.gram
    # B's tolerance floor in Frobenius units of W: ||E^T ΔB E||_F <= ||E||_2² sqrt(n) max |ΔB| (rounding_floor)
    floor_scale = float(np.linalg.norm(E, 2) ** 2 * np.sqrt(flow.n))
    membership = _scc_membership(analysis) if analysis is not None else None
    wmax = max(float(np.linalg.norm(traj.final.W)), 1.0)
    out = []
    for j, tau in enumerate(later):
        y = sol.y[:, j]
        B = flow.full_B(y)
        W = flow.W1 - E.T @ B @ E
        A = flow.A1 - M @ B @ M
        L, G = loss_and_grad_scores(A, flow.data)
        norm, corr, fe, coef, fit, mass = checkpoint_measures(W, A, problem, analysis, membership)
        wmax = max(wmax, norm)
        err = None
        if fine is not None:
            err = float(np.linalg.norm(E.T @ (flow.full_B(fine.y[:, j]) - B) @ E))
        D = float(y[flow.n])
        shadowed = None if sol.shadowing is None else float(sol.shadowing[j])
        out.append(ContinuationCheckpoint(int(tau), W, float(L), norm, corr, fe, coef, fit, mass,
                                          float(np.linalg.norm(E.T @ G @ E)), engine="continuation",
                                          gd_deviation_bound=D if shadowed is None else min(D, shadowed),
                                          gronwall_bound=D, shadowing_bound=shadowed, integration_error=err,
                                          gd_rounding=float((tau - tau1) * gd_rounding_per_step(problem, wmax)),
                                          rounding_floor=float(floor_scale * sol.floor[j])))
    base.checkpoints += out
    base.nfev, base.njev, base.continuation_seconds = nfev, njev, seconds
    base.method, base.stopped = sol.methods, stopped
    return base


# ------------------------------------------------------------------------------------------------
# Validity: the continuation against discrete GD on the statistics Theorem 1's verdict uses
# ------------------------------------------------------------------------------------------------
@dataclass
class Agreement:
    """One statistic on discrete GD and on the continuation at one budget, and how far apart the deviation
    bound lets them be (``tolerance``; ``inf`` where the bound cannot resolve the statistic)."""
    name: str
    gd: float
    continuation: float
    tolerance: float
    distance: float | None = None  # default |gd - continuation|

    def __post_init__(self):
        if self.distance is None:
            a, b = self.gd, self.continuation
            self.distance = 0.0 if a == b else abs(a - b) if np.isfinite(a) and np.isfinite(b) else float("inf")

    @property
    def agrees(self) -> bool:
        return bool(self.distance <= self.tolerance)

    @property
    def excess(self) -> float:
        """``distance / tolerance``: <= 1 agrees; the planted defects' size in the same unit."""
        if self.tolerance == float("inf"):
            return 0.0
        return self.distance / self.tolerance if self.tolerance > 0 else float("inf") if self.distance > 0 else 0.0

    def __str__(self):
        return (f"{self.name}: GD {self.gd:.6g}, continuation {self.continuation:.6g}, |Δ| {self.distance:.3g} "
                f"{'<=' if self.agrees else '>'} tolerance {self.tolerance:.3g}")


def _score_sensitivity(problem: Problem) -> float:
    """``max_j ||e_j|| · max_k ||e_k||``: a move ``ΔW`` shifts every score ``e_j^T W e_k`` by at most this x ``||ΔW||_F``."""
    r = float(np.linalg.norm(problem.E, axis=1).max())
    return r * r


def bounds_of(cont: Trajectory) -> dict[int, float]:
    """``{step: δ}``: the deviation bound (:func:`~theory.li2024.provenance.deviation`) of every checkpoint of ``cont``."""
    return {x.step: deviation(x) for x in cont.checkpoints}


def compare(gd: Trajectory, cont: Trajectory, analysis: Analysis, budget: int,
            bounds: dict[int, float] | None = None) -> list[Agreement]:
    """The statistics of :func:`theory.li2024.criteria.theorem1_statistics` on ``gd`` and ``cont`` (both cut at
    ``budget``, with checkpoints at the same steps) and the tolerance each inherits from :func:`~theory.li2024.provenance.deviation`.

    With ``δ(τ)`` the bound on ``||W_GD(τ) - W(τ)||_F`` (0 at GD checkpoints) at the budget's ``τ, τ/10, τ/100``:

    * ``W``: at every shared checkpoint ``||ΔW|| <= δ`` (the worst ratio is reported).
    * coefficient ``c = <W, Ŵ>`` moves by at most ``δ``, so the gains ``g₁ = c(τ) - c(τ/10)``, ``g₀`` by
      ``Δ₁ = δ(τ) + δ(τ/10)``, ``Δ₀ = δ(τ/10) + δ(τ/100)``; the growth ratio's tolerance is the widest
      ``|(g₁ ± Δ₁)/(g₀ ∓ Δ₀) - g₁/g₀|`` (infinite when ``Δ₀ >= g₀``).
    * direction: the increment ``v = W(τ) - W(τ/10)`` moves by ``Δ₁``, its angle θ to ``W^svm`` by at most
      ``arcsin(Δ₁/||v||)``; the rate ``tan θ · ln(τ/τ₀)`` (same ``τ₀`` on both) by the widest change of ``tan``.
    * finite error ``||Π_S W - W^fin||``: by ``δ(τ)`` (a projection does not expand); its largest value over
      ``[τ/100, τ/10]`` by the largest ``δ`` there.
    * leak ``1 - top-SCC mass`` at ``τ`` and ``τ/10``: every score moves by ``σ = s_E δ``
      (``_score_sensitivity``), each attention ratio by ``e^{±2σ}``, so the leak by a factor
      ``e^{±2σ}``; plus the rounding of ``1 - mass`` (``4 K eps``).

    ``bounds`` (``{step: δ}``, :func:`bounds_of`) gives ``δ``; default ``cont``'s own.  ``D`` is a property of
    the exact flow, integrated along the path the engine computed: a defective engine (the planted wrong sign
    of the step) integrates it along a wrong path and reports a bound of its own making (measured: 2.5e6 on
    ``examples/scc_above_token.json``).  A continuation under test is therefore judged against the bounds of
    the reference engine's run (the property does so), never against its own report alone.
    """
    from theory.li2024 import criteria
    from theory.li2024.training import truncate

    g, c = truncate(gd, budget), truncate(cont, budget)
    if g.final.step != c.final.step:
        raise ValueError(f"compare(): the runs end at {g.final.step} and {c.final.step}, not at one budget")
    at = {x.step: x for x in g.checkpoints}
    end, mid, early = (criteria._at(c, c.final.step / f) for f in (1, 10, 100))
    bounds = bounds_of(c) if bounds is None else bounds

    def delta(x):  # the reference bound at a checkpoint (0 where it is GD's own)
        return 0.0 if engine_of(x) == "gd" else bounds[x.step]

    d_end, d_mid, d_early = delta(end), delta(mid), delta(early)
    out = []

    worst = None
    for x in c.checkpoints:
        if engine_of(x) == "gd" or x.step not in at:
            continue
        dist, tol = float(np.linalg.norm(x.W - at[x.step].W)), delta(x)
        a = Agreement(f"W at step {x.step}", 0.0, dist, tol, dist)
        if worst is None or a.excess > worst.excess:
            worst = a
    if worst is not None:
        out.append(worst)

    if analysis.svm.norm == 0:
        # W^svm = 0: the decision's statistics are W's moves over the last two decades
        # (criteria.finite_convergence_statistics); a move is a difference of two W's, so its bound is the sum.
        for name, a, b, d in (("moved over the last decade", end, mid, d_end + d_mid),
                              ("moved over the decade before", mid, early, d_mid + d_early)):
            out.append(Agreement(name, float(np.linalg.norm(at[a.step].W - at[b.step].W)),
                                 float(np.linalg.norm(a.W - b.W)), d))
        return out

    _, mg = criteria.theorem1_statistics(g, analysis)
    _, mc = criteria.theorem1_statistics(c, analysis)
    Wsvm, sn = analysis.svm.W, analysis.svm.norm

    def coef(x):
        return float(np.sum(x.W * Wsvm) / sn)

    g1, g0 = coef(end) - coef(mid), coef(mid) - coef(early)
    D1, D0 = d_end + d_mid, d_mid + d_early
    if g0 - D0 > 0:
        r = g1 / g0
        tol = max(abs((g1 + D1) / (g0 - D0) - r), abs((g1 - D1) / (g0 + D0) - r))
    else:
        tol = float("inf")
    out.append(Agreement("growth ratio", mg["growth_ratio"], mc["growth_ratio"], tol))

    v = float(np.linalg.norm(end.W - mid.W))
    L = mc["log_time"]
    inc = mc["incremental_correlation"]
    if v > D1 and inc > 0:
        theta = float(np.arccos(min(1.0, inc)))
        dth = float(np.arcsin(D1 / v))
        hi = theta + dth
        tol = float("inf") if hi >= np.pi / 2 else L * max(np.tan(hi) - np.tan(theta),
                                                             np.tan(theta) - np.tan(max(0.0, theta - dth)))
    else:
        tol = float("inf")
    out.append(Agreement("direction rate", mg["direction_rate"], mc["direction_rate"], tol))

    out.append(Agreement("finite error", mg["finite_error"], mc["finite_error"], d_end))
    d_window = max([delta(x) for x in c.checkpoints if early.step <= x.step <= mid.step] or [0.0])
    out.append(Agreement("finite error over the decade before", mg["finite_error_prev"], mc["finite_error_prev"],
                         d_window))

    sE = _score_sensitivity(analysis.problem)
    floor = 4 * analysis.problem.K * EPS
    for name, x, d in (("leak", end, d_end), ("leak a decade before", mid, d_mid)):
        leak_g, leak_c = 1 - at[x.step].top_scc_mass, 1 - x.top_scc_mass
        spread = 2 * sE * d
        tol = leak_c * float(np.expm1(spread)) + floor if spread < 700 else float("inf")
        out.append(Agreement(name, leak_g, leak_c, tol))
    return out


# ------------------------------------------------------------------------------------------------
# The decisions' escalation through the continuation
# ------------------------------------------------------------------------------------------------
def _gd_part(run) -> Trajectory:
    """``run`` up to its last GD checkpoint (the GD checkpoints come first)."""
    last = max(c.step for c in run.checkpoints if engine_of(c) == "gd")
    if last == run.final.step:
        return run
    from theory.li2024.training import truncate

    return truncate(run, last)


class Escalation:
    """``extend(run, steps)`` for :func:`theory.core.decision.sequential`: budgets past the GD run by the
    continuation once it agreed with GD over GD's own last decade, by GD otherwise (module docstring).

    Parameters
    ----------
    problem : Problem
        The problem the run was trained on.
    analysis : Analysis
        The problem's true analysis: the validity check compares Theorem 1's statistics against its targets
        (a decision against a planted wrong target uses the same runs, validated against the truth).
    recorded : Trajectory, optional
        The same run already extended (e.g. by an earlier decision): its budgets are reused where it reaches.
    horizon : int
        The continuation's maximum budget (``CONTINUE_MAX_STEPS``).
    plant : dict, optional
        A planted defect of the continuation (``continue_flow``'s ``sign`` or ``time_scale``), for the property
        that the validity check refuses it; leave it None.

    Attributes
    ----------
    checks : dict
        ``{τ₁: (agrees, agreements)}``: the validity check of the GD run ending at ``τ₁``.
    """

    def __init__(self, problem: Problem, analysis: Analysis, recorded: Trajectory | None = None,
                 horizon: int = CONTINUE_MAX_STEPS, plant: dict | None = None):
        self.problem, self.analysis, self.recorded, self.horizon = problem, analysis, recorded, horizon
        self.plant = plant or {}
        # (τ₁, steps) -> run: decisions on one run share them; (τ₁, -1): the solve to the top (None: it failed)
        self.runs: dict[tuple[int, int], Trajectory | None] = {}
        self.checks: dict[int, tuple[bool, list]] = {}
        self.refused: str | None = None  # GD's label once the continuation was refused

    def applies(self, run) -> str | None:
        """Why the continuation cannot stand in for GD on ``run`` (None when it can)."""
        from theory.li2024.losses import TokenData

        if run.normalized:
            return "normalized GD"
        data = TokenData.from_problem(self.problem)
        if data.loss != "log" or not data.biorthogonal:
            return "not the log loss under Assumption 1"
        if self.analysis.svm.norm > 0 and self.analysis.finite is None:
            return "no W^fin to compare the finite error with"
        if run.final.step < 100:
            return "GD ran fewer than 100 steps"
        return None

    def check(self, run) -> tuple[bool, list]:
        """The validity check on ``run``'s GD part ``[τ₁/10, τ₁]`` (cached per ``τ₁``): ``(agrees, agreements)``;
        a reason string in place of the agreements when the continuation does not apply or failed."""
        gd = _gd_part(run)
        tau1 = int(gd.final.step)
        if tau1 in self.checks:
            return self.checks[tau1]
        why = self.applies(gd)
        if why is not None:
            self.checks[tau1] = (False, why)
            return self.checks[tau1]
        from theory.li2024.criteria import _at
        from theory.li2024.training import truncate

        start = truncate(gd, _at(gd, tau1 / 10).step)
        steps = [c.step for c in gd.checkpoints if c.step > start.final.step]
        try:
            cont = continue_flow(self.problem, start, tau1, self.analysis, estimate_error=True, checkpoints=steps,
                                 **self.plant)
            got = compare(gd, cont, self.analysis, tau1)
        except (FloatingPointError, ValueError, np.linalg.LinAlgError) as exc:
            self.checks[tau1] = (False, f"the continuation failed over [{start.final.step}, {tau1}]: {exc}")
            return self.checks[tau1]
        self.checks[tau1] = (all(a.agrees for a in got), got)
        return self.checks[tau1]

    def reach(self, run) -> int:
        """The largest budget this escalation can produce from ``run``: ``horizon`` when the continuation
        passed its check, else 0 (the caller keeps GD's own cap)."""
        return self.horizon if self.refused is None and self.check(run)[0] else 0

    def disagreement(self, run) -> str:
        """Why the continuation is not used on ``run`` ("" when it is)."""
        ok, got = self.check(run)
        if ok:
            return ""
        if isinstance(got, str):
            return got
        worst = max((a for a in got if not a.agrees), key=lambda a: a.excess)
        return f"{worst} over [{_gd_part(run).final.step // 10}, {_gd_part(run).final.step}]"

    def first_at(self, gd, need: float) -> tuple[Trajectory | None, str]:
        """``(run, "")``: ``gd`` continued straight to the first budget of its ladder at or past ``need`` (a
        decision's first budget where ``10^4 τ₀`` is past what GD runs), or ``(None, why)`` where the
        continuation is not used on ``gd`` (:meth:`check`), ``need`` is past its ladder, or it failed first."""
        from theory.core.decision import budget_ladder

        if not self.reach(gd):
            return None, f"the continuation is not used: {self.disagreement(gd)}"
        first = next((b for b in budget_ladder(int(gd.final.step), self.horizon) if b >= need), None)
        if first is None:
            return None, f"past the continuation's last budget ({self.horizon})"
        try:
            return self(gd, first), ""
        except ContinuationFailed as exc:
            return None, f"the continuation failed before them: {exc}"

    def _to_top(self, gd) -> Trajectory | None:
        """The continuation from ``gd`` to the last budget of its ladder (the ``τ₁ 10^k`` nearest ``horizon``),
        solved once per GD run and cut at each budget below it (one solve instead of one per budget; the
        escalated Theorem 1 decision reads its trend there).  Where that solve fails in a later decade it keeps
        the decades completed before it (``partial``), and the budgets past them are solved one by one (a
        solve that ends inside the failed decade can still finish); the first that fails raises
        :class:`ContinuationFailed`.  None when it reached no budget."""
        from theory.core.decision import budget_ladder

        tau1 = int(gd.final.step)
        ladder = budget_ladder(tau1, max(tau1, self.horizon))
        key = (tau1, -1)
        if key not in self.runs:
            later = np.union1d(log_checkpoints(ladder[-1]), np.asarray(ladder, dtype=np.int64))
            try:
                top = self._continued(gd, ladder[-1], later, partial=True)
            except FloatingPointError:
                top = None
            # A solve that stopped before the ladder's first budget holds nothing to cut.
            self.runs[key] = top if top is not None and top.final.step > tau1 else None
        return self.runs[key]

    def _continued(self, gd, steps: int, checkpoints=None, partial: bool = False) -> ContinuedTrajectory:
        """:func:`continue_flow` from ``gd`` to ``steps``, its notes saying where it started and why."""
        out = continue_flow(self.problem, gd, steps, self.analysis, checkpoints=checkpoints, partial=partial,
                            **self.plant)
        tau1 = int(gd.final.step)
        out.notes.append(f"continued from GD at {tau1} (agreed over [{tau1 // 10}, {tau1}])")
        return out

    def __call__(self, run, steps: int):
        from theory.li2024.training import resume, truncate

        if self.recorded is not None and self.recorded.final.step >= steps:
            return truncate(self.recorded, steps)
        gd = _gd_part(run)
        key = (int(gd.final.step), int(steps))
        if key in self.runs:
            return self.runs[key]
        if self.refused is None and self.check(gd)[0]:
            if steps > self.horizon * np.sqrt(10):  # the ladder's last budget is the one *nearest* the horizon
                raise ValueError(f"Escalation: {steps} steps past the continuation's horizon {self.horizon}")
            top = self._to_top(gd)
            if top is not None and top.final.step >= steps:
                return truncate(top, steps)
            try:
                self.runs[key] = self._continued(gd, steps)
            except FloatingPointError as exc:
                raise ContinuationFailed(steps, str(exc)) from None
            return self.runs[key]
        if self.refused is None:  # decided once, on the first GD run: the later budgets stay on GD
            self.refused = "gd" if self.applies(gd) is not None else f"gd (continuation disagreed: {self.disagreement(gd)})"
        longer = resume(self.problem, gd, steps, analysis=self.analysis)
        if self.refused != "gd":
            longer = ContinuedTrajectory(longer.checkpoints, longer.eta, longer.normalized, longer.seconds,
                                         continued_from=longer.final.step, notes=[self.refused])
        self.runs[key] = longer
        return longer
