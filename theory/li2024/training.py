"""Gradient descent on ``L(W)`` (Li et al. 2024, Algo-GD; docs/theory.md "How the paper measures").

GD runs in token space: with ``M = E E^T`` and ``A = E W E^T``, a step ``W <- W - s E^T G E`` is
``A <- A - s M G M``, and accumulating ``B = Σ s_t G_t`` gives ``W(τ) = W(0) - E^T B(τ) E`` exactly
(no information about W is lost: the part of W(0) outside the row space of E never moves).

Plain GD uses ``s_t = η``; normalized GD uses ``s_t = η / ||grad_W L||_F`` with
``||E^T G E||_F^2 = tr(G^T M G M)``.  Checkpoints are log-spaced; each carries the paper's metrics.

Normalized GD below the rounding floor (one rule, shared with :mod:`theory.li2024.engine`).  When
``||grad_W L||_F <= floor`` (:func:`theory.li2024.losses.loss_grad_and_floor`: the computed gradient is within
``floor`` of the true one) its direction is rounding noise, and ``η g/||g||`` would be a full step of
length η in a random direction: repeated, a random walk of W along directions that change nothing
(measured before this rule on ``reproduce li-local``: 23-43 Frobenius units of drift).  The rule:
*no step* (``s_t = 0``), so W stays at a point that is stationary to working precision.  The
authors' code adds 2.2e-16 to the norm, which has the same effect only when ``||g|| << 2.2e-16``
whatever the problem's scale; the floor here scales with the problem (it is relative to the size of
the terms that make up the gradient), so rescaling ``E`` or the loss does not move it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from theory.li2024.analysis import Analysis
from theory.li2024.losses import TokenData, loss_and_grad_scores, loss_grad_and_floor, sample_attention
from theory.core.problem import Problem

__all__ = ["Checkpoint", "Trajectory", "log_checkpoints", "resume", "train", "truncate"]


def log_checkpoints(steps: int, per_decade: int = 8) -> np.ndarray:
    """Log-spaced checkpoint steps: 0, 1, ..., ``steps``.

    Parameters
    ----------
    steps : int
        The last step (always included).
    per_decade : int, default 8
        Roughly how many checkpoints per decade of steps.

    Returns
    -------
    numpy.ndarray
        Sorted, distinct int64 steps starting at 0.

    Examples
    --------
    >>> log_checkpoints(100).tolist()
    [0, 1, 2, 3, 4, 6, 7, 10, 13, 18, 24, 32, 42, 56, 75, 100]
    """
    if steps <= 0:
        return np.array([0])
    pts = np.unique(np.round(np.logspace(0, np.log10(steps), max(2, int(per_decade * np.log10(steps + 1)) + 1))))
    # logspace's last point is ``steps`` up to rounding, which is more than 1 past ~3e14 (2e16 -> 20000000000000004,
    # 769891656313799 -> ...798): kept, it was a checkpoint past the last or next to it, with the last's ln τ, which
    # the continuation's solver refuses.  Every other point is at least a factor 10^(1/per_decade) below ``steps``.
    pts = pts[pts < steps * (1.0 - 1e-9)]
    return np.unique(np.concatenate([[0], pts.astype(np.int64), [steps]]))


def gd_numpy(A0: np.ndarray, data: TokenData, M: np.ndarray, eta: float, checkpoints, normalized: bool = False):
    """The reference token-space GD loop.  Returns ``(B, losses)`` at each checkpoint (B: K x K)."""
    A = A0.copy()
    B = np.zeros_like(A0)
    out_B, out_L = [], []
    cps = list(checkpoints)
    c = 0
    for t in range(int(cps[-1]) + 1):
        if normalized:
            L, G, floor = loss_grad_and_floor(A, data, M)
        else:
            L, G = loss_and_grad_scores(A, data)
        if t == cps[c]:
            out_B.append(B.copy())
            out_L.append(L)
            c += 1
            if c == len(cps):
                break
        if not np.isfinite(L):
            raise FloatingPointError(f"GD diverged at step {t}: loss {L}")
        s = eta
        if normalized:
            s = normalized_scale(eta, grad_norm_scores(G, M), floor)
        B += s * G
        A -= s * (M @ G @ M)
    return np.array(out_B), np.array(out_L)


def grad_norm_scores(G: np.ndarray, M: np.ndarray) -> float:
    """``||E^T G E||_F = sqrt(tr(G^T M G M))``, scaled by ``max|G|`` first so that a gradient of
    size 1e-200 (saturated attention) does not square to an underflow."""
    gmax = float(np.abs(G).max(initial=0.0))
    if gmax == 0.0 or not np.isfinite(gmax):
        return gmax
    Gs = G / gmax
    return gmax * float(np.sqrt(max(float(np.sum((Gs.T @ M @ Gs) * M.T)), 0.0)))


def normalized_scale(eta: float, grad_norm: float, floor: float) -> float:
    """The step scale of normalized GD: ``η/||g||``, or 0 at or below the rounding floor (module docstring)."""
    return eta / grad_norm if grad_norm > floor else 0.0


@dataclass
class Checkpoint:
    """The state of a GD run at one step, with the paper's metrics.

    Attributes
    ----------
    step : int
        The step (0 is ``W(0)``).
    W : numpy.ndarray
        The d x d attention weights.
    loss : float
        ``L(W)``.
    norm : float
        ``||W||_F``.
    correlation, finite_error, svm_coefficient, fit_residual, top_scc_mass : float or None
        With an analysis (None otherwise, and ``correlation`` None when ``W^svm = 0``):
        ``<W, W^svm> / (||W|| ||W^svm||)``; ``||Π_S W - W^fin||``; ``<W, W^svm/||W^svm||>``;
        ``min_R ||W^fin + R W^svm - W||``; the smallest, over samples, of the largest attention mass one SCC
        receives.
    grad_norm : float
        ``||grad_W L||_F``.
    """
    step: int
    W: np.ndarray
    loss: float
    norm: float
    correlation: float | None  # <W, W^svm> / (||W|| ||W^svm||); None when W^svm = 0
    finite_error: float | None  # ||Π_S W - W^fin||
    svm_coefficient: float | None  # <W, W^svm/||W^svm||>
    fit_residual: float | None  # min_R ||W^fin + R W^svm - W||
    top_scc_mass: float | None  # min over samples of the largest attention mass one SCC receives
    grad_norm: float


@dataclass
class Trajectory:
    """A GD run: its checkpoints, step size and mode, and the seconds it took.

    Attributes
    ----------
    checkpoints : list of Checkpoint
        In step order.
    eta : float
        The step size.
    normalized : bool
        Normalized GD (``η/||g||`` steps) rather than plain GD.
    seconds : float
        Wall time of the GD loop.
    """
    checkpoints: list[Checkpoint]
    eta: float
    normalized: bool
    seconds: float

    @property
    def final(self) -> Checkpoint:
        """The last checkpoint."""
        return self.checkpoints[-1]

    def series(self, name: str) -> np.ndarray:
        """One metric over the checkpoints (``"loss"``, ``"correlation"``, ...), NaN where it is None."""
        return np.array([getattr(c, name) if getattr(c, name) is not None else np.nan for c in self.checkpoints],
                        dtype=float)


def _scc_membership(analysis: Analysis) -> np.ndarray:
    """n x K: index of each token's SCC in its sample's query graph (-1 when absent)."""
    p = analysis.problem
    comp = -np.ones((p.n, p.K), dtype=np.int64)
    for i, seq in enumerate(p.sequences):
        c = analysis.graphs[seq[-1]].component
        for t in set(seq):
            comp[i, t] = c[t]
    return comp


def top_scc_mass(A: np.ndarray, problem: Problem, membership: np.ndarray) -> float:
    """``min_i max_C Σ_{t ∈ C} a_i[t]``: the least, over samples, of the largest attention one SCC of the
    sample's query graph receives (``membership`` from :func:`_scc_membership`)."""
    a = sample_attention(A, problem)  # per sample, so rows align with ``membership``
    onehot = membership[:, :, None] == np.arange(int(membership.max()) + 1)  # n x K x C; absent tokens (-1): none
    return float((a[:, :, None] * onehot).sum(axis=1).max(axis=1).min())


def train(problem: Problem, steps: int, eta: float, normalized: bool = False, W0: np.ndarray | None = None,
          analysis: Analysis | None = None, checkpoints=None, engine: str = "auto") -> Trajectory:
    """Gradient descent on ``L(W)`` (plain or normalized) with metrics at log-spaced checkpoints.

    Parameters
    ----------
    problem : Problem
        The problem (:class:`theory.core.problem.Problem`).
    steps : int
        Number of GD steps.
    eta : float
        Step size, > 0 (:func:`theory.li2024.losses.safe_step` gives one below ``1/β``).
    normalized : bool, default False
        Normalized GD: steps ``η g/||g||`` (none below the rounding floor; see the module docstring).
    W0 : numpy.ndarray, optional
        The d x d start; default 0.
    analysis : Analysis, optional
        :func:`theory.li2024.analysis.analyze`'s answer: the checkpoints then carry the metrics that need
        ``W^svm`` and ``W^fin`` (correlation, finite error, ...).
    checkpoints : array_like of int, optional
        The steps to record; default :func:`log_checkpoints`.
    engine : {"auto", "numpy", "compiled", "extended"}
        ``numpy`` is the reference loop, ``compiled`` its numba version (``auto``: compiled when numba
        imports), ``extended`` 50-digit arithmetic (slow).

    Returns
    -------
    Trajectory

    Raises
    ------
    ValueError
        On a ``W0`` of the wrong shape, a step size that is not a positive number or an unknown engine.
    FloatingPointError
        When the loss diverges.

    Examples
    --------
    >>> from theory.core.problem import Problem
    >>> from theory.li2024.analysis import analyze
    >>> p = Problem.load("examples/scc_above_token.json")
    >>> run = train(p, 200, 0.5, analysis=analyze(p), engine="numpy")
    >>> run.final.step, run.final.loss < run.checkpoints[0].loss, run.final.correlation > 0.9
    (200, True, True)
    """
    d = problem.d
    E = problem.E
    W0 = np.zeros((d, d)) if W0 is None else np.asarray(W0, dtype=float)
    if W0.shape != (d, d):
        raise ValueError(f"W(0): expected a {d}x{d} matrix, got {W0.shape[0]}x{W0.shape[1]}")
    if not (np.isfinite(eta) and eta > 0):
        raise ValueError(f"step size: expected a positive number, got {eta}")
    cps = log_checkpoints(steps) if checkpoints is None else np.asarray(checkpoints, dtype=np.int64)
    data = TokenData.from_problem(problem)
    M = problem.gram
    A0 = E @ W0 @ E.T
    start = time.perf_counter()
    Bs, Ls = run_gd(A0, data, M, eta, cps, normalized, engine)
    seconds = time.perf_counter() - start
    membership = _scc_membership(analysis) if analysis is not None else None
    out = []
    for t, B, L in zip(cps, Bs, Ls):
        W = W0 - E.T @ B @ E
        A = A0 - M @ B @ M
        _, G = loss_and_grad_scores(A, data)
        out.append(Checkpoint(int(t), W, float(L), *checkpoint_measures(W, A, problem, analysis, membership),
                              float(np.linalg.norm(E.T @ G @ E))))
    return Trajectory(out, eta, normalized, seconds)


def checkpoint_measures(W: np.ndarray, A: np.ndarray, problem: Problem, analysis, membership):
    """``(norm, correlation, finite_error, svm_coefficient, fit_residual, top_scc_mass)`` of an iterate ``W``
    (scores ``A = E W E^T``) against ``analysis`` (all but the norm None without one): the measures of a
    :class:`Checkpoint`, whichever engine produced ``W``."""
    norm = float(np.linalg.norm(W))
    corr = fe = coef = fit = mass = None
    if analysis is not None:
        Wsvm = analysis.svm.W
        sn = analysis.svm.norm
        Wfin = analysis.finite.W if analysis.finite is not None else np.zeros_like(W)
        if sn > 0:
            coef = float(np.sum(W * Wsvm) / sn)
            corr = coef / norm if norm > 0 else 0.0
            D = W - Wfin
            fit = float(np.linalg.norm(D - np.sum(D * Wsvm) / sn**2 * Wsvm))
        if analysis.finite is not None:
            fe = float(np.linalg.norm(analysis.space.project(W) - Wfin))
        mass = top_scc_mass(A, problem, membership)
    return norm, corr, fe, coef, fit, mass


def resume(problem: Problem, traj: Trajectory, steps: int, analysis: Analysis | None = None,
           engine: str = "auto") -> Trajectory:
    """A run continued to ``steps`` steps, resumed from its last iterate.

    Plain and normalized GD keep no state but ``W``; the new checkpoints are those a run of ``steps`` steps
    from the start would have past the old end.  The escalations of :mod:`theory.core.decision` use it
    instead of training from zero: escalating 10x then costs 9x, not 11x, the first budget.

    Parameters
    ----------
    problem : Problem
        The problem ``traj`` was trained on.
    traj : Trajectory
        The run so far.
    steps : int
        The total number of steps wanted (``traj`` is returned unchanged when it already has them).
    analysis : Analysis, optional
        As for :func:`train`.
    engine : str, default "auto"
        As for :func:`train`.

    Returns
    -------
    Trajectory
        ``traj``'s checkpoints followed by the new ones.

    Examples
    --------
    >>> from theory.core.problem import Problem
    >>> p = Problem.load("examples/scc_above_token.json")
    >>> longer = resume(p, train(p, 10, 0.5, engine="numpy"), 100, engine="numpy")
    >>> longer.final.step, [c.step for c in longer.checkpoints][-3:]
    (100, [56, 75, 100])
    """
    done = traj.final.step
    if steps <= done:
        return traj
    later = log_checkpoints(steps)
    offsets = np.concatenate([[0], later[later > done] - done])
    more = train(problem, int(offsets[-1]), traj.eta, traj.normalized, W0=traj.final.W, analysis=analysis,
                 checkpoints=offsets, engine=engine)
    shifted = [replace(c, step=c.step + done) for c in more.checkpoints[1:]]
    return Trajectory(traj.checkpoints + shifted, traj.eta, traj.normalized, traj.seconds + more.seconds)


def truncate(traj: Trajectory, steps: int) -> Trajectory:
    """The same run as it stood after ``steps`` steps (its checkpoints up to ``steps``).

    A recorded long run judged again at an earlier budget, e.g. against a planted wrong target.

    Parameters
    ----------
    traj : Trajectory
    steps : int

    Returns
    -------
    Trajectory
    """
    return replace(traj, checkpoints=[c for c in traj.checkpoints if c.step <= steps])


def run_gd(A0, data, M, eta, checkpoints, normalized, engine: str = "auto"):
    """Dispatch to a token-space GD engine: ``numpy`` (the reference :func:`gd_numpy`), ``compiled``
    (:func:`theory.li2024.engine.gd_compiled`, numba), ``extended`` (:func:`theory.core.exact.gd_extended`, 50 digits,
    slow: for replaying a counterexample) or ``auto`` (compiled when numba imports)."""
    if engine == "numpy":
        return gd_numpy(A0, data, M, eta, checkpoints, normalized)
    if engine == "compiled":
        from theory.li2024.engine import gd_compiled  # an ImportError here is the honest answer

        return gd_compiled(A0, data, M, eta, checkpoints, normalized)
    if engine == "extended":  # 50 digits throughout: the replay of a single counterexample
        from theory.core.exact import gd_extended

        return gd_extended(A0, data, M, eta, checkpoints, normalized)
    if engine == "auto":
        try:
            from theory.li2024.engine import gd_compiled
        except ImportError:
            return gd_numpy(A0, data, M, eta, checkpoints, normalized)
        return gd_compiled(A0, data, M, eta, checkpoints, normalized)
    raise ValueError(f"unknown engine {engine!r} (expected auto, numpy, compiled or extended)")
