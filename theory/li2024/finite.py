"""The finite component ``W^fin`` (docs/theory.md, "Graph-SVM, the cyclic subspace and the finite component").

``L̃(W) = lim_{R->inf} L(W + R W^svm)`` keeps, in each sample, only the tokens of its label's SCC
(the margins of W^svm send every other token's attention to 0), so ``L̃`` is the same loss on masked
counts.  ``W^fin = argmin_{W ∈ S_fin} L̃(W)``, found by a damped Newton method in an orthonormal basis
of ``S_fin`` and certified by ``||grad_{S_fin} L̃(W^fin)|| <= max(1e-9 ||grad_{S_fin} L̃(0)||, its float64 floor at the answer)``
(:meth:`_Objective.gradient_floor`).
For ``log`` under Assumptions 1-2 ``L̃`` is convex on S_fin with a unique minimizer; for other losses
the same method returns a local minimizer (documented relaxation, certified the same way).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.li2024.graphs import TPG, label_scc_mask, token_priority_graphs
from theory.li2024.losses import TokenData, loss_and_grad_scores
from theory.core.problem import Problem
from theory.li2024.subspace import CyclicSubspace, cyclic_subspace
from theory.li2024.svm import SolverError

__all__ = ["FiniteSolution", "NoFiniteMinimizer", "finite_component"]

GRAD_TOL = 1e-9


@dataclass(frozen=True)
class FiniteSolution:
    """A certified finite component ``W^fin`` (:func:`finite_component`).

    Attributes
    ----------
    W : numpy.ndarray
        ``W^fin``, d x d, in the cyclic subspace ``S_fin``.
    theta : numpy.ndarray
        Its coordinates in the orthonormal basis of ``S_fin``.
    loss : float
        ``L̃(W^fin)``.
    grad_norm, grad_norm0 : float
        ``||grad_{S_fin} L̃||`` at ``W^fin`` and at 0 (the certificate compares them).
    iterations : int
        Newton iterations taken.
    error_bound : float or None
        With ``bound``: an a-posteriori bound on ``||W - W^fin||_F``.
    grad_norm_extended : float or None
        With ``bound``: the gradient on ``S_fin`` at 40 digits.
    min_curvature : float or None
        With ``bound``: the smallest Hessian eigenvalue of ``L̃`` on ``S_fin`` at ``W``.
    """

    W: np.ndarray
    theta: np.ndarray
    loss: float
    grad_norm: float
    grad_norm0: float
    iterations: int
    error_bound: float | None = None  # a-posteriori bound on ||W - W^fin||_F (see error_bound)
    grad_norm_extended: float | None = None  # the gradient on S_fin at 40 digits
    min_curvature: float | None = None  # smallest Hessian eigenvalue of L̃ on S_fin at W


def error_bound(problem: Problem, space: CyclicSubspace, data: TokenData, theta: np.ndarray,
                hessian: np.ndarray, grad_norm: float | None = None) -> tuple[float, float, float]:
    """``(bound, ||grad||, lambda_min)``: ``||W - W^fin||_F <= ||grad_{S_fin} L̃(W)|| / lambda_min``.

    The gradient is evaluated at 40 digits (:func:`theory.core.exact.mp_subspace_gradient_norm`; ``grad_norm``
    when the caller has it already), so it is the true gradient of the float point, not rounding noise.
    For a ``mu``-strongly convex function ``||θ - θ*|| <= ||∇f(θ)|| / mu``; ``lambda_min`` is the smallest
    eigenvalue of the Hessian on S_fin at the point, which equals ``mu`` near θ* up to a relative change of
    order ``||θ - θ*||`` (the bound is first-order, and at the 1e-12 gradients certified here the
    correction is far below the bound itself).  ``inf`` when the Hessian is not positive definite (a loss
    for which L̃ is not convex).
    """
    from theory.core.exact import mp_subspace_gradient_norm

    gn = mp_subspace_gradient_norm(problem.E, space.basis, theta, data) if grad_norm is None else grad_norm
    lo = float(np.linalg.eigvalsh(hessian)[0]) if hessian.size else 0.0
    return (gn / lo if lo > 0 else float("inf")), gn, lo


def extended_refinement(problem: Problem, space: CyclicSubspace, data: TokenData, theta: np.ndarray,
                        hessian, max_steps: int = 4) -> tuple[np.ndarray, float]:
    """``(θ, ||grad||)``: Newton's float64 answer refined against the gradient at 40 digits.

    Float64 Newton stops where the *computed* gradient is rounding noise, and that noise is the rounding of
    scores of size ``||W|| ||E||²`` -- on a nearly flat problem (curvatures 1e-12 and 1e-6 on S_fin,
    ``||W^fin|| ~ 2.5e5``) it leaves a true gradient that depends on the machine's BLAS kernels: within the
    regression test's 1e-12 relative on one CPU, 5.8e-16 (1.7e-12 relative, error bound 6.1e-4) on another.  Iterative refinement (residual in
    extended precision, correction ``-H⁻¹ g`` in float64) moves θ to the float64 grid point the exact
    gradient says is nearest the minimizer, on every machine; it stops when a correction no longer
    lowers the exact gradient (θ's own rounding is then the limit).
    """
    from theory.core.exact import mp_subspace_gradient

    g, gn = mp_subspace_gradient(problem.E, space.basis, theta, data)
    for _ in range(max_steps):
        if gn == 0:
            break
        try:
            step = -np.linalg.solve(hessian(theta), g)
        except np.linalg.LinAlgError:
            break
        cand = theta + step
        if np.array_equal(cand, theta):
            break
        g_c, gn_c = mp_subspace_gradient(problem.E, space.basis, cand, data)
        if not gn_c < gn:
            break
        theta, g, gn = cand, g_c, gn_c
    return theta, gn


def limit_data(problem: Problem, graphs: dict[int, TPG] | None = None, loss: str | None = None,
               mask: np.ndarray | None = None) -> TokenData:
    """Token data of ``L̃``: each sample restricted to its label's SCC.

    A sample whose label is absent (Assumption 2 relaxed) is dropped: W^fin is defined only under
    Assumption 2, and this is the convention the relaxation tests judge against.  With ``mask`` (n x K,
    e.g. a pseudo-TPG's selected SCC, :mod:`theory.li2024.pseudo`) each sample keeps the masked tokens instead,
    and only samples left with no token are dropped (the head-logit losses need no label in context).
    """
    m = label_scc_mask(problem, graphs) if mask is None else mask
    data = TokenData.from_problem(problem, counts=problem.counts * m, loss=loss)
    if mask is None:
        keep = data.counts[np.arange(len(data.labels)), data.labels] > 0
    else:
        keep = data.counts.sum(axis=1) > 0
    if keep.all():
        return data
    return TokenData(data.counts[keep], data.queries[keep], data.labels[keep], data.weights[keep], data.H,
                     data.loss, data.biorthogonal)


class _Objective:
    """``L̃`` as a function of coordinates θ in an orthonormal basis of S_fin."""

    def __init__(self, problem: Problem, space: CyclicSubspace, data: TokenData):
        self.data = data
        E = problem.E
        self.T = np.einsum("ja,rab,kb->rjk", E, space.basis, E)  # basis in token space: E Q_r E^T
        # The same products np.tensordot forms, without its per-call reshaping: the regularization path's
        # SLSQP solves call this ~10^3 times per radius, where tensordot's overhead was a third of the call.
        self._flat = self.T.reshape(len(self.T), self.T.shape[1] * self.T.shape[2])

    def __call__(self, theta):
        K = self.T.shape[1]
        L, G = loss_and_grad_scores(np.dot(theta[None, :], self._flat).reshape(K, K), self.data)
        return L, np.dot(self._flat, G.reshape(-1, 1))[:, 0]

    def gradient_floor(self, theta) -> float:
        """The float64 resolution of ``||grad_θ L̃||`` at θ:
        ``floor_ulps(K) · eps · Σ_i w_i (||grad_θ ℓ_i|| + ||J_i||_F ||Σ_r |θ_r| |T_r|_i||)``.

        Two roundings.  The per-sample gradients cancel in the sum (at the minimizer, to 0) but each carries
        its own relative rounding, so the noise scales with their norms, not with the sum's (the floor of
        :func:`theory.li2024.losses.loss_grad_and_floor`).  And the scores ``s_i = Σ_r θ_r T_r[:, q_i]`` are rounded
        to ``eps Σ_r |θ_r| |T_r|``, which the softmax passes on through its Hessian (norm <= 1) and
        ``J_i = ds_i/dθ``; where ``||W^fin||`` is large it is the larger term.  Measured at the 40-digit-refined
        answers of the strategies' problems (exact gradient ~0, so the float gradient is rounding alone):
        <= 0.15 of this floor on 244; without the score term it reached 1.22x on 163.
        Both terms scale with the problem like the gradient (``E -> αE``: α²)."""
        from theory.li2024.losses import _per_sample, floor_ulps

        _, ds = _per_sample(np.tensordot(theta, self.T, axes=1), self.data)  # m x K
        q = self.data.queries
        J = self.T[:, :, q]  # r x K x m
        present = (self.data.counts > 0).T  # K x m
        per_sample = np.linalg.norm(np.einsum("rkm,mk->mr", J, ds), axis=1)
        s_abs = np.tensordot(np.abs(theta), np.abs(self.T), axes=1)[:, q] * present  # K x m
        jac = np.sqrt(np.einsum("rkm,rkm,km->m", J, J, present))
        scores = jac * np.linalg.norm(s_abs, axis=0)
        return float(floor_ulps(self.T.shape[1]) * np.finfo(float).eps * (self.data.weights @ (per_sample + scores)))

    def hessian(self, theta):
        r = len(theta)
        if self.data.loss == "log" and self.data.biorthogonal:
            from theory.li2024.losses import attention
            a = attention(np.tensordot(theta, self.T, axes=1), self.data)
            J = self.T[:, :, self.data.queries]  # r x K x m : ds_ij/dθ_r
            # Cov_a(J_i) = sum_t a_t (J_t - J_r)(J_t - J_r)^T - m m^T with m = sum_t a_t (J_t - J_r) and r the most
            # attended token: the same matrix as J diag(a) J^T - (J a)(J a)^T, without that difference of
            # two nearly equal O(|J|^2) terms.  Saturated, the textbook form keeps no digits of the O(1 - a_r)
            # curvature (stress: E = I, margin 64, a tangent Hessian with eigenvalue -4.7e-29 where the
            # loss is convex, and Newton on the sphere stalled at a KKT residual of 1e-3).
            Hs = np.zeros((r, r))
            for i, w in enumerate(self.data.weights):
                ai = a[i]
                Di = J[:, :, i] - J[:, [int(np.argmax(ai))], i]
                m = Di @ ai
                Hs += w * (Di @ (ai[:, None] * Di.T) - np.outer(m, m))
            return Hs
        # Central differences of the analytic gradient, symmetrised.
        h = 1e-6 * max(1.0, float(np.linalg.norm(theta)))
        cols = [(self(theta + h * e)[1] - self(theta - h * e)[1]) / (2 * h) for e in np.eye(r)]
        Hm = np.array(cols)
        return (Hm + Hm.T) / 2


class NoFiniteMinimizer(SolverError):
    """``L̃`` has no finite minimizer on S_fin (it decreases toward infinity along S_fin).

    An answer, not a failure: :func:`theory.li2024.analysis.analyze` records its message as
    ``Analysis.finite_absent``."""


# Largest Hessian eigenvalue on S_fin at the answer, relative to its value at W = 0, below which L̃ is
# taken as flat (saturated), and the largest Newton step there, relative to max(1, ||θ||), of a certified
# minimizer: see finite_component.
FLAT = 1e-12
NEWTON_TOL = 1e-8


def _why_no_minimizer(data: TokenData) -> str:
    """What lets ``L̃`` fall toward infinity along S_fin on this problem (docs/theory.md: under Assumptions
    1-2 the log loss's ``L̃`` is strictly convex with a minimizer; a bounded loss or a broken head need not
    have one)."""
    causes = []
    if data.loss != "log":
        causes.append(f"the {data.loss} loss stays bounded as u -> 0, so nothing keeps L̃'s infimum at a "
                      "finite point")
    if not data.biorthogonal:
        causes.append("the head breaks Assumption 1")
    return "; ".join(causes) if causes else "not expected under Assumptions 1-2 with the log loss"


MAX_ESCAPES = 20  # saddle escapes in one minimization (each is followed by Newton's descent)
# Curvature below -NEG_CURV x the largest |curvature| at W = 0 marks a saddle (rounding of the Hessian is
# ~1e-16 relative; a genuine saddle of the symmetric exp-loss problems measured -2.4e-2 against 1e-1).
NEG_CURV = 1e-8


def _escape_saddle(f: "_Objective", theta: np.ndarray, L: float, h0: float):
    """``(theta, L, g)`` a step down the most negative curvature of ``L̃`` at ``theta``, or ``None`` when the
    curvature there is nonnegative (to ``NEG_CURV``) or no step along it lowers ``L̃``."""
    eig, V = np.linalg.eigh(f.hessian(theta))
    if not (h0 > 0 and eig[0] < -NEG_CURV * h0):
        return None
    v = V[:, 0]
    scale = max(1.0, float(np.linalg.norm(theta)))
    best = None
    for t in scale * np.geomspace(1e-3, 1e2, 16):
        for sign in (1.0, -1.0):
            cand = theta + sign * t * v
            Lc, gc = f(cand)
            if np.isfinite(Lc) and Lc < L and (best is None or Lc < best[1]):
                best = (cand, Lc, gc)
    return best


def finite_component(problem: Problem, graphs: dict[int, TPG] | None = None, space: CyclicSubspace | None = None,
                     loss: str | None = None, name: str = "problem", max_iter: int = 200,
                     bound: bool = False, mask: np.ndarray | None = None) -> FiniteSolution:
    """The finite component ``W^fin = argmin_{W ∈ S_fin} L̃(W)``, certified by its gradient norm on S_fin.

    Parameters
    ----------
    problem : Problem
        The problem (:class:`theory.core.problem.Problem`).
    graphs : dict, optional
        Its token-priority graphs by query, computed when omitted.
    space : CyclicSubspace, optional
        ``S_fin`` (:func:`theory.li2024.subspace.cyclic_subspace`), computed when omitted.
    loss : str, optional
        The loss of ``L̃``; default the problem's own.
    name : str, default "problem"
        Named in error messages.
    max_iter : int, default 200
        Newton iterations at most.
    bound : bool, default False
        Also compute the a-posteriori error bound (:func:`error_bound`, gradient at 40 digits).
    mask : numpy.ndarray, optional
        Replaces the label-SCC restriction of ``L̃`` (see :func:`limit_data`).

    Returns
    -------
    FiniteSolution
        ``W = 0`` when ``S_fin`` is ``{0}``.

    Raises
    ------
    NoFiniteMinimizer
        When ``L̃`` decreases toward infinity along ``S_fin`` (the message names the cause).
    SolverError
        When Newton's answer fails its certificate.

    Examples
    --------
    >>> from theory.core.problem import Problem
    >>> fin = finite_component(Problem.load("examples/scc_above_token.json"))
    >>> fin.W.shape, bool(fin.grad_norm <= 1e-9 * max(fin.grad_norm0, 1.0))
    ((4, 4), True)
    """
    graphs = graphs or token_priority_graphs(problem)
    space = space or cyclic_subspace(problem, graphs)
    d = problem.d
    if space.dim == 0:
        return FiniteSolution(np.zeros((d, d)), np.zeros(0), 0.0, 0.0, 0.0, 0, 0.0 if bound else None)
    f = _Objective(problem, space, limit_data(problem, graphs, loss, mask))
    theta = np.zeros(space.dim)
    L, g = f(theta)
    if not np.isfinite(L):
        raise NoFiniteMinimizer(
            f"W^fin of {name}: the limit loss L̃ is infinite at W = 0 (a sample's u = c_y^T f is <= 0 on "
            f"its label's SCC, where -log u is undefined), so W^fin is not defined for this head and loss "
            f"({_why_no_minimizer(f.data)})")
    g0 = float(np.linalg.norm(g))
    # Relative to the gradient at 0, so that E -> αE (gradients x α²) certifies the same point, and never
    # below what float64 resolves at the point (a W = 0 already minimal to rounding has g0 at that floor).
    # The former 1e-9 · max(1, g0) was absolute for g0 < 1: at E/16 (g0 x 1/256) it accepted 1e-9/g0 relative.
    rel_target = GRAD_TOL * g0

    def target_at(th) -> float:
        return max(rel_target, f.gradient_floor(th))

    target = target_at(theta)
    h0 = float(np.abs(np.linalg.eigvalsh(f.hessian(theta))).max())
    # Under Assumptions 1-2 with the log loss L̃ is strictly convex on S_fin (docs/theory.md); otherwise
    # it need not be, and the descent below guards against that (trust radius, saddle escape).
    convex = f.data.loss == "log" and f.data.biorthogonal
    it = 0
    escapes = 0
    while it < max_iter:
        if np.linalg.norm(g) <= target:
            # A stationary point of a non-convex L̃ (a bounded loss's: exp, square) can be a saddle, e.g.
            # W = 0 of a symmetric problem, where Newton's step is 0.  Leave it along the most negative
            # curvature (never needed under Assumptions 1-2 with log: L̃ is convex there).
            moved = _escape_saddle(f, theta, L, h0)
            if moved is None or escapes >= MAX_ESCAPES:
                break
            escapes += 1
            theta, L, g = moved
            target = target_at(theta)
            continue
        it += 1
        Hm = f.hessian(theta)
        eig_m = np.linalg.eigvalsh(Hm)
        lo, hs = float(eig_m[0]), float(np.abs(eig_m).max())
        if not hs > 0:
            break  # L̃ flat to float64 here: judged below (no finite minimizer, or not certified)
        # Damping relative to the Hessian's own scale (E -> αE scales it by α⁴): an absolute 1e-12 test and
        # 1e-8 shift damped every step of a valid problem (stress seed 2826461318: cond(E) = 955, curvature
        # 1e-12 and 1e-6 on S_fin, the 1e-8 shift shrank Newton's steps 1e4-fold and 200 iterations stalled
        # at gradient 2e-8; undamped Newton reaches 0 in four).
        shift = 0.0 if lo > 1e-12 * hs else (1e-12 * hs - lo) + 1e-8 * hs
        step = -np.linalg.solve(Hm + shift * np.eye(len(theta)), g)
        if not convex:
            # A non-convex L̃ (bounded losses, broken heads) can fall toward a higher infimum at infinity
            # while its minimizer is near: a shifted Newton step at negative curvature is huge and jumped
            # past it (the square-loss problem with its minimizer at δ = 1.86 was reported "no finite
            # minimizer" after a jump to ||W|| = 41).  A trust radius max(1, ||θ||) keeps the descent in
            # its basin; it still doubles ||θ|| per step where the minimizer is far.
            n_step = float(np.linalg.norm(step))
            radius = max(1.0, float(np.linalg.norm(theta)))
            if n_step > radius:
                step = step * (radius / n_step)
        # Full step first: accepted when it satisfies Armijo or shrinks the gradient -- near the minimizer
        # the decrease of L falls below its rounding and Armijo alone would stall on tiny steps.  (For a
        # non-convex L̃ a shrinking gradient alone can mean a climb toward a saddle: L must not rise beyond
        # its own rounding, which near the minimizer is all the change there is.)
        t = 1.0
        L_new, g_new = f(theta + step)
        if not (L_new <= L + 1e-4 * (g @ step)
                or (np.linalg.norm(g_new) < 0.5 * np.linalg.norm(g)
                    and (convex or L_new <= L + 8 * np.finfo(float).eps * max(1.0, abs(L))))):
            while t >= 1e-12:  # Armijo backtracking
                t /= 2
                L_new, g_new = f(theta + t * step)
                if L_new <= L + 1e-4 * t * (g @ step) and L_new < L:
                    break
            else:
                break
        theta, L, g = theta + t * step, L_new, g_new
        target = target_at(theta)
    # Past the 1e-9 target, full Newton steps while they still halve the gradient: quadratic convergence
    # takes it to the rounding level in one or two, and the error bound then reports ~1e-15, not 1e-9.
    for _ in range(3):
        if not np.isfinite(np.linalg.norm(g)) or np.linalg.norm(g) > target:
            break
        try:
            step = -np.linalg.solve(f.hessian(theta), g)
        except np.linalg.LinAlgError:
            break
        L_new, g_new = f(theta + step)
        if not np.linalg.norm(g_new) < 0.5 * np.linalg.norm(g):
            break
        theta, L, g = theta + step, L_new, g_new
    if not convex:
        # A flat but positive curvature (a square loss's minimizer: smallest eigenvalue 1e-9) leaves a Newton
        # step of 1e-4 at a gradient already below target, and Newton converges only linearly there: take
        # full steps while the curvature stays positive, the step shrinks and L does not rise beyond its
        # rounding, until the step is below NEWTON_TOL (the certificate asks that) or 50 steps.
        prev = float("inf")
        for _ in range(50):
            Hm = f.hessian(theta)
            if not np.linalg.eigvalsh(Hm)[0] > 0:
                break
            step = -np.linalg.solve(Hm, g)
            n_step = float(np.linalg.norm(step))
            if n_step <= NEWTON_TOL * max(1.0, float(np.linalg.norm(theta))) or not n_step < prev:
                break
            L_new, g_new = f(theta + step)
            if not L_new <= L + 8 * np.finfo(float).eps * max(1.0, abs(L)):
                break
            theta, L, g, prev = theta + step, L_new, g_new, n_step
    gn = float(np.linalg.norm(g))
    target = target_at(theta)
    if not np.isfinite(gn) or gn > target:
        raise SolverError(f"W^fin of {name}: gradient norm on S_fin {gn:.2e} after {it} Newton steps "
                          f"exceeds {target:.1e} ({GRAD_TOL:g} of its {g0:.2e} at W = 0, or float64's floor)")
    # A small gradient certifies a minimizer only where L̃ still curves around it.  Where L̃ has no finite
    # minimizer (possible without Assumption 1: a tied head, another loss) its Newton descent runs off
    # along S_fin, gradient and curvature decaying together: the gradient test passes (li-local, ce: at
    # ||W|| ~ 16) while the Newton step stays O(1), and further out both underflow to exactly 0.  Under the
    # assumptions L̃ is strictly convex on S_fin; measured on 226 strategy problems with a cyclic part: the
    # largest curvature at W^fin is >= 0.56 of its value at 0 and the Newton step <= 1.4e-14 relative,
    # against >= 4.6e-2 at the runaway points.
    H = f.hessian(theta)
    eig = np.linalg.eigvalsh(H) if H.size else np.zeros(1)
    h = float(np.abs(eig).max())
    scale = max(1.0, float(np.linalg.norm(theta)))
    step = -np.linalg.solve(H, g) if eig[0] > 0 else None
    newton = float(np.linalg.norm(step)) if step is not None else float("inf")
    if h0 > 0 and h <= FLAT * h0:
        raise NoFiniteMinimizer(
            f"W^fin of {name}: no finite minimizer of the limit loss L̃ on S_fin: its Newton descent ran to "
            f"||W|| = {np.linalg.norm(theta):.3g}, where L̃ is flat to float64 (largest curvature {h:.2e}, "
            f"{h0:.2e} at W = 0), i.e. L̃ falls toward infinity along S_fin ({_why_no_minimizer(f.data)})")
    if newton > NEWTON_TOL * scale:
        d = step if step is not None else -g
        L1, L10 = f(theta + d)[0], f(theta + 10 * d)[0]
        if L1 < L and L10 < L1:
            raise NoFiniteMinimizer(
                f"W^fin of {name}: no finite minimizer of the limit loss L̃ on S_fin: at ||W|| = "
                f"{np.linalg.norm(theta):.3g} the gradient is {gn:.2e} but the Newton step is {newton:.3g} "
                f"and L̃ keeps falling along it ({L:.12g} -> {L1:.12g} -> {L10:.12g} at 1x, 10x), i.e. L̃ "
                f"falls toward infinity along S_fin ({_why_no_minimizer(f.data)})")
        if not convex and abs(eig[0]) <= NEWTON_TOL * h:
            # A minimum flat along a direction (square loss, two tokens on a 2-d S_fin: curvature 1.2e-11 of
            # the largest; another at W = 0 with -2.5e-11, rounding of either sign): L̃'s minimizers form a
            # set, not the point W^fin the finite-part verdicts compare with (Theorem 2 speaks of an element
            # of that set).  An answer, not a numerical failure.
            raise NoFiniteMinimizer(
                f"W^fin of {name}: no unique minimizer of the limit loss L̃ on S_fin: at ||W|| = "
                f"{np.linalg.norm(theta):.3g} the gradient is {gn:.2e} but L̃ is flat along a direction "
                f"(smallest curvature {eig[0]:.2e}, {eig[0] / h:.1e} of the largest), so its minimizers form a "
                f"set and no single W^fin is certified ({_why_no_minimizer(f.data)})")
        raise SolverError(f"W^fin of {name}: gradient {gn:.2e} but Newton step {newton:.3g} at ||W|| = "
                          f"{np.linalg.norm(theta):.3g}: not a certified minimizer (smallest curvature {eig[0]:.2e})")
    if not bound:
        return FiniteSolution(space.compose(theta), theta, float(L), gn, g0, it)
    theta, gx = extended_refinement(problem, space, f.data, theta, f.hessian)
    L, g = f(theta)
    eb, gx, lo = error_bound(problem, space, f.data, theta, f.hessian(theta), grad_norm=gx)
    return FiniteSolution(space.compose(theta), theta, float(L), float(np.linalg.norm(g)), g0, it, eb, gx, lo)
