"""Gradient descent on the factors of ``W = W_K W_Q^T`` (issue 38, part 2).

``W_K, W_Q ∈ R^{d x m}`` (``m >= d`` and ``m < d`` both allowed), from a small seeded Gaussian start
``σ N(0, 1)`` entrywise.  The loss is the engine's ``L(W)`` of the product
(:func:`theory.li2024.losses.loss_and_grad`, the stable form), and by the chain rule with
``G_W = ∇L(W)``:

    ∇_{W_K} L = G_W W_Q,      ∇_{W_Q} L = G_W^T W_K.

GD on both factors at once, with a constant step ``eta`` when one is given, else with the *local safe
step* ``η_t = 1/β_t``,

    β_t = β (||W_K||_2² + ||W_Q||_2²) + ||G_W||_2,

an upper bound on the curvature of ``(W_K, W_Q) -> L(W_K W_Q^T)`` along any unit direction ``(D_K, D_Q)`` at
the current point (``β`` the W-space bound of :func:`theory.li2024.losses.smoothness`): the second
derivative is ``D²L[dW, dW] + <G_W, 2 D_K D_Q^T>`` with ``dW = D_K W_Q^T + W_K D_Q^T``, and
``||dW||_F² <= (||W_K||_2² + ||W_Q||_2²)(||D_K||² + ||D_Q||²)``, ``2|<G, D_K D_Q^T>| <= ||G||_2 (||D_K||² + ||D_Q||²)``.
The W-space safe step alone is *not* safe in the factors: with it the loss rose between checkpoints once
the factors had grown (drawn K = 3 cyclic problem, m = 1, 2000 steps).  A step set from the current point
bounds the curvature there, not along the whole step; the tests check that the loss does not rise.  The
spectral norms are replaced by the (larger, cheaper) Frobenius norms.  The product's trajectory is reported at
log-spaced checkpoints (:func:`theory.li2024.training.log_checkpoints`): the step, ``W``, the loss,
``||W||_F`` and the correlation ``<W, D>/(||W|| ||D||)`` with the Frobenius ``W^svm`` and with the
nuclear-norm one (:mod:`theory.li2024.nuclear`), when given.

Two engines run the same iteration: ``numpy`` (:func:`numpy_iterates`, the reference) and ``compiled``
(:mod:`theory.li2024.factor_engine`, numba; ``benchmarks/bench_factorized.py`` measures both); ``auto``
takes the compiled one for the losses it has kernels for (``log``, ``square``, ``exp``).  They agree to the
rounding accumulated along the run (``properties/li2024/test_factorized.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from theory.core.problem import Problem
from theory.li2024.losses import TokenData, loss_and_grad, safe_step
from theory.li2024.training import log_checkpoints

__all__ = ["FactorCheckpoint", "FactorizedRun", "factor_grads", "init_factors", "numpy_iterates", "train_factorized"]


@dataclass(frozen=True)
class FactorCheckpoint:
    step: int
    W: np.ndarray
    loss: float
    norm: float
    corr_frobenius: float | None  # with W^svm (Frobenius); None when it is not given or is 0
    corr_nuclear: float | None  # with W^nuc


@dataclass
class FactorizedRun:
    m: int
    eta: float | None  # None: the local safe step
    seed: int
    init_scale: float
    checkpoints: list = field(default_factory=list)
    WK: np.ndarray | None = None
    WQ: np.ndarray | None = None

    @property
    def final(self) -> FactorCheckpoint:
        return self.checkpoints[-1]


def _corr(W, D):
    if D is None:
        return None
    nw, nd = float(np.linalg.norm(W)), float(np.linalg.norm(D))
    if nw == 0 or nd == 0:
        return None
    return float(np.sum(W * D) / (nw * nd))


def init_factors(d: int, m: int, seed: int = 0, scale: float = 1e-2) -> tuple[np.ndarray, np.ndarray]:
    """``(W_K, W_Q)``, each ``d x m`` with i.i.d. ``N(0, scale²)`` entries from ``numpy.random.default_rng(seed)``."""
    if int(m) != m or m < 1:
        raise ValueError(f"factor width m must be a positive integer, got {m!r}")
    rng = np.random.default_rng(seed)
    return scale * rng.standard_normal((d, int(m))), scale * rng.standard_normal((d, int(m)))


def factor_grads(WK: np.ndarray, WQ: np.ndarray, problem: Problem, data: TokenData | None = None):
    """``(L, ∇_{W_K} L, ∇_{W_Q} L)`` at ``W = W_K W_Q^T``."""
    L, G = loss_and_grad(WK @ WQ.T, problem, data)
    return L, G @ WQ, G.T @ WK


def train_factorized(problem: Problem, steps: int, m: int, eta: float | None = None, seed: int = 0,
                     init_scale: float = 1e-2, frobenius: np.ndarray | None = None,
                     nuclear: np.ndarray | None = None, checkpoints=None, engine: str = "auto") -> FactorizedRun:
    """GD on ``(W_K, W_Q)`` for ``steps`` steps, with the constant step ``eta`` or (None) the local safe step
    of the module docstring.

    Parameters
    ----------
    problem : Problem
    steps : int
        The run's length.
    m : int
        The factors' width.
    eta : float, optional
        A constant step; None for the local safe step.
    seed, init_scale
        The start (:func:`init_factors`).
    frobenius, nuclear : numpy.ndarray, optional
        The two SVM solutions the checkpoints' correlations are taken with.
    checkpoints : sequence of int, optional
        The steps recorded (those above ``steps`` ignored); log-spaced by default.
    engine : {"auto", "numpy", "compiled"}
        ``numpy``: the loop here; ``compiled``: :func:`theory.li2024.factor_engine.factor_gd_compiled` (raises on
        the ``ce``/``lsq`` losses); ``auto``: compiled where it has a kernel, else numpy.

    Returns
    -------
    FactorizedRun
    """
    if engine not in ("auto", "numpy", "compiled"):
        raise ValueError(f"unknown engine {engine!r} (expected auto, numpy or compiled)")
    if steps < 0:
        raise ValueError(f"steps must be non-negative, got {steps}")
    beta = 1.0 / safe_step(problem)
    if eta is not None and not (np.isfinite(eta) and eta > 0):
        raise ValueError(f"step size must be a positive number, got {eta}")
    data = TokenData.from_problem(problem)
    WK, WQ = init_factors(problem.d, m, seed, init_scale)
    marks = set(int(s) for s in (log_checkpoints(steps) if checkpoints is None else checkpoints))
    run = FactorizedRun(int(m), eta, seed, init_scale)  # eta None: the local safe step
    if engine != "numpy":
        from theory.li2024.factor_engine import compiled_supports, factor_gd_compiled

        if engine == "compiled" or compiled_supports(data):
            # the final factors are returned, so the run goes to ``steps`` whether or not it is a checkpoint
            wanted = sorted({s for s in marks if s <= steps} | {int(steps)})
            cps, Ws, Ls, run.WK, run.WQ = factor_gd_compiled(problem.E, WK, WQ, data, wanted, beta, eta)
            for s, W, L in zip(cps.tolist(), Ws, Ls):
                if s in marks:
                    run.checkpoints.append(FactorCheckpoint(int(s), W, float(L), float(np.linalg.norm(W)),
                                                            _corr(W, frobenius), _corr(W, nuclear)))
            return run

    for t, WK, WQ, L, _, _ in numpy_iterates(problem, m, eta, seed, init_scale, data):
        if t in marks:
            W = WK @ WQ.T
            run.checkpoints.append(FactorCheckpoint(t, W, float(L), float(np.linalg.norm(W)),
                                                    _corr(W, frobenius), _corr(W, nuclear)))
        if t == steps:
            break
    run.WK, run.WQ = WK, WQ
    return run


def numpy_iterates(problem: Problem, m: int, eta: float | None = None, seed: int = 0, init_scale: float = 1e-2,
                   data: TokenData | None = None):
    """The numpy loop of :func:`train_factorized`, one state at a time (the reference the compiled engine is
    tested against, whose tolerance needs every step's state).

    Yields
    ------
    tuple
        ``(t, W_K, W_Q, L, G, step)`` without end: the factors after ``t`` steps, the loss and ``G = ∇L(W)``
        at ``W = W_K W_Q^T``, and the step size taken from there to ``t + 1``.
    """
    beta = 1.0 / safe_step(problem)
    data = TokenData.from_problem(problem) if data is None else data
    WK, WQ = init_factors(problem.d, m, seed, init_scale)
    t = 0
    while True:
        L, G = loss_and_grad(WK @ WQ.T, problem, data)
        if eta is None:
            bt = beta * (np.sum(WK * WK) + np.sum(WQ * WQ)) + np.linalg.norm(G)  # Frobenius >= spectral
            step = 1.0 / bt if bt > 0 else 1.0
        else:
            step = eta
        yield t, WK, WQ, L, G, step
        WK, WQ = WK - step * (G @ WQ), WQ - step * (G.T @ WK)
        t += 1
