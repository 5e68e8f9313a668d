"""GD through an escape from a saddle: a time shift along the unstable direction, marched in the flow's own time.

Why.  Where the continued flow sits near a stationary point for decades and then leaves it, four to six decades
past GD's reach (``examples/section5_escape_past_gds_reach.json``: exp loss, broken head, ``‖W‖`` 273 at 2e10
steps-equivalent and 4263 at 2e11), Grönwall's bound takes the escape's whole factor (630 at 2e12 from 1.4e-3
at 2e10, extended precision) and so does the path bound of :mod:`theory.li2024.shadowing`: while the flow
approaches the saddle its velocity is along the stable directions, and the unstable one, ``u``, is normal to it
(``|<u, v>|`` is 0.5 of ``||v||`` where ``t μ`` passes 1 and 6e-4 of it at 2e5 steps).  Every later budget was
undecided ("an ambiguous token within the continuation's bound").  But a deviation along ``u`` is still a
delay: the escape happens a little earlier or later, and afterwards GD follows the same path.

The bound.  Write GD's state as ``x(t) = φ(θ(t)) + e(t)``, ``θ`` chosen so that ``e ⊥ u(θ)``, ``u`` the unit
eigenvector of ``∇²L``'s least eigenvalue at the flow's point (``J = -∇²L``'s top one).  With GD written as
``x' = -∇L(x) + ℓ`` (``ℓ`` its local error, the forcing of the bounds of :mod:`theory.li2024.continuation`),
``e' = J e + v (1 - θ') + ℓ`` to first order, and keeping ``<u(θ), e> = 0``::

    θ' - 1 = (<u̇, e> + <u, ℓ>) / (<u, v> - <u̇, e>),
    d||e||/dt <= μ₂ ||e|| + ||P v|| |θ' - 1| + ||ℓ||,

``u̇ = du/dθ`` (its finite difference between accepted states, the nearer of ``±u``), ``μ₂ = max(0, -λ₂(∇²L))``
the rate on ``u⊥`` (``<e, J e> <= μ₂ ||e||²`` there: ``u`` is an eigenvector of the symmetric Hessian), and
``P v`` the velocity's part across ``u`` (the shift moves the flow's point along all of ``v``; only ``u``'s part
of ``e`` is cancelled).  ``D`` and ``Σ`` bound ``||e||`` and ``|σ| = |θ - t|``.

In the flow's time.  Every rate above is read at ``φ(θ)``, not at ``φ(t)``: through a fast escape the two differ by
the escape itself (measured on that draw: ``σ`` is 8e-5 of ``t``, about the length of the escape's last stretch).
So the march runs over the flow's accepted states ``θ_k`` and changes variable: with ``r = |θ' - 1| < 1/2``::

    dD/dθ <= (μ₂ D + ||P v|| r + ||ℓ||) / (1 - r),     dΣ/dθ <= r / (1 - r) < 1,

so ``θ - Σ(θ)`` increases, and GD at time ``t`` is within ``D(θ_m)`` of ``φ(θ(t))`` for the first node ``θ_m`` with
``θ_m - Σ_m >= t`` (both are non-decreasing), hence within ``D(θ_m) + Σ_m V`` of ``φ(t)``, ``V`` the flow's largest
speed within ``Σ_m`` of ``t`` (as the path bound's).  Where ``r`` reaches 1/2 (or a denominator is not positive)
the march is lost and the other bounds stand.  Past a decade's last node the march goes on with that node's
rates held (the next decade's nodes are not solved yet): a one-sided rule over ``ln(1 + Σ/t)``, a few 1e-4 of a
unit of log time on that draw.

Entry and handover.  The march is entered from the continuation's bound ``C`` (the smallest of its bounds at GD's
time ``t_i``) at a node where Grönwall's rate ``t μ`` reaches :data:`ESCAPE_ENTER` and the velocity has a part of at
least :data:`ESCAPE_LEAVE` along ``u``: the nearest ``θ₀`` with ``<u, x - φ(θ₀)> = 0`` is within ``σ₀ = C / min
|<u, v>|`` of ``t_i`` (the least over ``σ₀``'s own window: a fixed point), and ``||e|| <= C max ||v|| / min |<u, v>|``
(the norm of the oblique projection ``I - v uᵀ / <u, v>``).  The march starts at the first node at or after
``t_i - σ₀``: both bounds only grow along it, so starting early is the conservative side.  It is handed to
``e ⊥ v`` (the path bound's shift, its rates read at the node as here) before a step whose end has a part along
``u`` below ``ESCAPE_LEAVE``: the orthogonal projection keeps ``D`` and moves ``θ`` by at most ``D / ||v||``.  Where
each switch happens decides how tight the bound is, not whether it holds: every step and switch is one of the
first-order inequalities above.

Measured on the draw above (the verdict's extended pass, from GD's state at 2e5): ``t μ₂`` stays below 1e-7
through the escape while ``t μ`` peaks at 6e4; the march is entered at 2.5e10 steps from ``C`` = 1.2e-3 and leaves
the escape with ``D`` = 4.3e-3 and ``σ`` 9e-5 of ``t``; the continuation's bound is 0.085 at 2e12 against
Grönwall's 630.  GD cannot be run there: the march is checked on the flow itself restarted from moved states and on
a linear saddle solved to the rounding (``properties/li2024/test_escape.py``), and against GD on drawn problems of
Section 5's domain within the path bound (``properties/li2024/test_local_continuation.py``).
"""
from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["ESCAPE_ENTER", "ESCAPE_LEAVE", "MAX_SHIFT_RATE", "Pair", "EscapeMarch", "unstable_direction",
           "shifted_bound", "velocity_shift_rate", "window_speed"]

#: Grönwall's rate ``t μ`` at which the march is entered (its factor e per unit of log time).  With
#: :data:`ESCAPE_LEAVE` it chooses the proof's path, not its validity (module docstring).
ESCAPE_ENTER = 1.0
#: The part of the velocity along ``u`` the march needs to be entered, and below which it is handed to ``e ⊥ v``.
ESCAPE_LEAVE = 0.1
#: ``|θ' - 1|`` past which the march is lost: the change of variable to the flow's time needs it below 1, and at
#: 1/2 it doubles the bound's rates.
MAX_SHIFT_RATE = 0.5
# The entry's shift is a fixed point of σ₀ = C / min |<u, v>| over σ₀'s window: this many passes, or no entry.
ENTRY_PASSES = 8


@dataclasses.dataclass(frozen=True)
class Pair:
    """The march's state at a node of the flow's time: ``e ⊥ u`` (``mode`` "u") or ``e ⊥ v`` ("v"), ``||e|| <= D``
    and ``|θ - t| <= sigma`` (``sigma`` in units of ``t``)."""

    mode: str
    D: float
    sigma: float


def unstable_direction(S: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """``(u, μ₂, |<u, v>|, ||v - <u, v> u||)`` for the Hessian ``S`` (symmetric) and the velocity ``v``: ``u`` the unit
    eigenvector of ``S``'s least eigenvalue, ``μ₂ = max(0, -λ₂(S))`` the rate on ``u⊥``, ``v``'s parts along and
    across ``u``.  In one dimension ``u⊥`` is empty and ``μ₂`` is 0."""
    w, E = np.linalg.eigh(S)
    u = E[:, 0]
    along = float(u @ v)
    mu2 = max(0.0, -float(w[1])) if len(w) > 1 else 0.0
    return u, mu2, abs(along), float(np.linalg.norm(v - along * u))


def _window(ts, t: float, sig: float) -> slice | None:
    """The nodes within ``[t - σ, t + σ]`` and one on each side (between two nodes a rate is taken as the worse
    of theirs); ``None`` for an infinite ``σ``."""
    if not np.isfinite(sig):
        return None
    lo = np.log(t - sig) if sig < t else -np.inf
    k0 = max(int(np.searchsorted(ts, lo)) - 1, 0)
    k1 = min(int(np.searchsorted(ts, np.log(t + sig))) + 1, len(ts))
    return slice(k0, max(k1, k0 + 1))


def window_speed(ts, speed, t: float, sig: float) -> float:
    """``V``: the flow's largest speed over the nodes within ``[t - σ, t + σ]`` and one on each side (the speeds
    ``speed`` at ``s = ts``; infinite for an infinite ``σ``)."""
    w = _window(ts, t, sig)
    if w is None:
        return float("inf")
    window = speed[w]
    return float(np.max(window)) if np.all(np.isfinite(window)) else float("inf")


def shifted_bound(D: float, sig: float, ts, speed, t: float) -> float:
    """``D + σ V``: GD at time ``t`` is within ``D`` of the flow at a time ``θ`` with ``|θ - t| <= σ``, and the flow
    moves at most ``|θ - t| V`` from ``θ`` to ``t`` (``V`` = :func:`window_speed`), so GD is within this of ``φ(t)``."""
    return D + sig * window_speed(ts, speed, t, sig)


def _turns(ts, U) -> np.ndarray:
    """``||du/dθ||`` over each interval between consecutive nodes (the nearer of ``±u``); infinite where ``u`` is
    not finite."""
    if len(ts) < 2:
        return np.zeros(0)
    with np.errstate(invalid="ignore"):
        step = np.minimum(np.linalg.norm(U[1:] - U[:-1], axis=1), np.linalg.norm(U[1:] + U[:-1], axis=1))
        per = step / np.diff(np.exp(ts))
    per[~np.isfinite(per)] = np.inf
    return per


def velocity_shift_rate(t: float, speed: float, jv: float, beta: float, D: float) -> float:
    """``|dσ/ds|`` under ``e ⊥ v`` (the path bound's shift, :mod:`theory.li2024.shadowing`):
    ``t (2 ||J v|| D + ||v|| β / t) / (||v||² - ||J v|| D)``, infinite where the denominator is not positive (the
    nearest point of the path is not defined there)."""
    den = speed ** 2 - jv * D
    return t * (2.0 * jv * D + speed * beta / t) / den if den > 0 else np.inf


def _rates(pair: Pair, rates, ts, k: int, D: float, turn: float) -> tuple[float, float, float]:
    """``(growth, forcing, dΣ/ds)`` per unit of ``s = ln θ`` at node ``k`` with ``||e|| <= D`` (module docstring,
    the flow's time); infinite where the march is lost."""
    alpha, speed, jv, beta, _, mu2, along, across = rates[:, k]
    theta = float(np.exp(ts[k]))
    if pair.mode == "v":
        R = velocity_shift_rate(theta, speed, jv, beta, D)
        growth, forcing = alpha, beta
    else:
        den = along - turn * D
        R = theta * (turn * D + beta / theta) / den if den > 0 else np.inf
        growth, forcing = mu2, beta + across * R
    q = R / theta
    if not q < MAX_SHIFT_RATE:
        return np.inf, np.inf, np.inf
    return growth / (1.0 - q), forcing / (1.0 - q), R / (1.0 - q)


def _advance(pair: Pair, rates, turns, ts, i: int, k: int, may_leave: bool = True) -> Pair | None:
    """The march from node ``i`` to node ``k > i`` by the trapezoidal rule (the rates at ``k`` read at an Euler
    predictor of ``D``), handed to ``e ⊥ v`` first where ``k``'s velocity has less than ``ESCAPE_LEAVE`` along ``u``
    (and ``may_leave``: not before the GD time it was entered at); ``None`` where it is lost."""
    _, speed, _, _, _, _, along, _ = rates
    if pair.mode == "u" and may_leave and not along[k] >= ESCAPE_LEAVE * speed[k]:
        if not speed[i] > 0:
            return None
        pair = Pair("v", pair.D, pair.sigma + pair.D / speed[i])
    turn = float(turns[i:k].max()) if pair.mode == "u" else 0.0
    h = ts[k] - ts[i]
    with np.errstate(over="ignore", invalid="ignore"):
        a1, f1, r1 = _rates(pair, rates, ts, i, pair.D, turn)
        guess = (pair.D + h * f1) * np.exp(h * a1)
        a2, f2, _ = _rates(pair, rates, ts, k, guess, turn)
        g = np.exp(0.5 * h * (a1 + a2))
        D = pair.D * g + 0.5 * h * (f1 * g + f2)
        _, _, r2 = _rates(pair, rates, ts, k, D, turn)
        sigma = pair.sigma + 0.5 * h * (r1 + r2)
    return Pair(pair.mode, float(D), float(sigma)) if np.isfinite(D) and np.isfinite(sigma) else None


def _entry(rates, ts, t: float, C: float) -> tuple[int, Pair] | None:
    """``(node, pair)``: the march entered from ``||x(t) - φ(t)|| <= C`` (module docstring, entry), to start at
    ``node``, the first at or after ``t - σ₀``; ``None`` where the fixed point is not reached."""
    _, speed, _, _, _, _, along, _ = rates
    k = int(np.searchsorted(ts, np.log(t)))
    if not (np.isfinite(C) and k < len(ts) and along[k] > 0):
        return None
    sig = C / along[k]
    for _ in range(ENTRY_PASSES):
        w = _window(ts, t, sig)
        low = float(along[w].min())
        if not low > 0:
            return None
        if sig >= t:  # a shift as long as the time itself: no point of the flow near t is meant
            return None
        if C / low <= sig:
            first = int(np.searchsorted(ts, np.log(t - sig))) if sig < t else 0
            return first, Pair("u", C * float(speed[w].max()) / low, sig)
        sig = 1.1 * C / low  # any σ₀ at or above the fixed point holds: a margin to reach it in a few passes
    return None


class _Track:
    """One march: its state ``pair`` at the node ``idx[pos]`` (``pair`` ``None`` once lost), entered at GD's time of
    ``idx[entered]`` (it starts earlier, at ``t - σ₀``, and is not handed over before it gets there)."""

    def __init__(self, pos: int, pair: Pair | None, entered: int = 0):
        self.pos, self.pair, self.entered = pos, pair, entered

    def step(self, march: "EscapeMarch") -> None:
        i, k = march.idx[self.pos], march.idx[self.pos + 1]
        self.pair = _advance(self.pair, march.rates, march.turns, march.ts, i, k, self.pos >= self.entered)
        self.pos += 1


class EscapeMarch:
    """The marches over the nodes ``idx`` of one decade (accepted states at ``s = ts[k]``, ``rates`` and ``U`` as
    :func:`theory.li2024.shadowing.node_rates` gives them), from ``start`` at ``idx[0]``, each advanced only as far
    as the GD times asked for need it.  A march is entered wherever :meth:`may_enter` says so; one entered earlier
    goes on beside it (an entry from a wide bound inside an escape does not replace a march that crossed it), and
    the bound is the smallest of theirs."""

    def __init__(self, ts, rates, U, idx, start: Pair | None):
        self.ts, self.rates, self.idx = ts, rates, np.asarray(idx)
        self.turns = _turns(ts, U)
        self.tracks = [_Track(0, start)] if start is not None else []

    def may_enter(self, j: int) -> bool:
        """Whether a march is entered at GD's time of node ``idx[j]``: Grönwall's rate at least ``ESCAPE_ENTER``, a
        part of at least ``ESCAPE_LEAVE`` of the velocity along ``u``, and no march along ``u`` under way."""
        _, speed, _, _, full, _, along, _ = self.rates
        k = self.idx[j]
        busy = any(tr.pair is not None and tr.pair.mode == "u" for tr in self.tracks)
        return not busy and full[k] >= ESCAPE_ENTER and along[k] >= ESCAPE_LEAVE * speed[k] and along[k] > 0

    def enter(self, j: int, C: float) -> None:
        """Enter a march from the bound ``C`` at GD's time of node ``idx[j]`` (none where the entry fails)."""
        t = float(np.exp(self.ts[self.idx[j]]))
        got = _entry(self.rates, self.ts, t, C)
        if got is None:
            return
        node, pair = got
        self.tracks = [tr for tr in self.tracks if tr.pair is not None]
        self.tracks.append(_Track(min(int(np.searchsorted(self.ts[self.idx], self.ts[node])), j), pair, j))

    def bound(self, j: int) -> float:
        """The bound on ``||x(t) - φ(t)||`` at GD's time ``t`` of node ``idx[j]``: the smallest over the marches of
        ``D_m + Σ_m V`` at the first node ``m`` with ``θ_m - Σ_m >= t`` (past the last node, its rates held);
        infinite where every march is lost."""
        t = float(np.exp(self.ts[self.idx[j]]))
        return min((self._bound(tr, t) for tr in self.tracks), default=float("inf"))

    def _bound(self, tr: _Track, t: float) -> float:
        while tr.pair is not None and float(np.exp(self.ts[self.idx[tr.pos]])) - tr.pair.sigma < t:
            if tr.pos + 1 == len(self.idx):
                return self._held(tr.pair, t)
            tr.step(self)
        if tr.pair is None:
            return float("inf")
        return shifted_bound(tr.pair.D, tr.pair.sigma, self.ts, self.rates[1], t)

    def _held(self, pair: Pair, t: float) -> float:
        """Past the last node: its rates held until ``θ - Σ(θ) >= t`` (a few passes of that fixed point)."""
        k = self.idx[-1]
        turn = float(self.turns[max(k - 1, 0):k].max()) if pair.mode == "u" and k > 0 else 0.0
        a, f, r = _rates(pair, self.rates, self.ts, k, pair.D, turn)
        if not np.isfinite(r):
            return float("inf")
        theta0, sig = float(np.exp(self.ts[k])), pair.sigma
        for _ in range(ENTRY_PASSES):  # any σ with σ >= Σ(θ) at θ = t + σ holds: a margin to reach it
            h = max(float(np.log((t + sig) / theta0)), 0.0)
            new = pair.sigma + h * r
            if new <= sig:
                break
            sig = 1.001 * new
        else:
            return float("inf")
        h = max(float(np.log((t + sig) / theta0)), 0.0)
        D = (pair.D + h * f) * float(np.exp(h * a))
        return shifted_bound(D, sig, self.ts, self.rates[1], t)

    def end(self) -> Pair | None:
        """The march at the decade's last node that bounds it best (the next decade's start), or ``None``."""
        t = float(np.exp(self.ts[self.idx[-1]]))
        best, value = None, float("inf")
        for tr in self.tracks:
            while tr.pair is not None and tr.pos + 1 < len(self.idx):
                tr.step(self)
            if tr.pair is not None:
                b = shifted_bound(tr.pair.D, tr.pair.sigma, self.ts, self.rates[1], t)
                if b < value:
                    best, value = tr.pair, b
        return best
