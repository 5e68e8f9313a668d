"""The finite-budget verdicts of Tian et al. 2023's Theorems 2-4 on the long-sequence-limit dynamics.

The criteria and their calibration are stated in ``properties/tian2023/test_theorems.py``'s module
docstring; this module holds them so that the properties and the claims registry call one copy.
"""
from __future__ import annotations

import numpy as np

from theory.tian2023.model import gain_identity_residual

RTOL, ATOL = 1e-6, 1e-8
IDENTITY_TOL = 1e-6


# after the snap dz/dt ~ t^-p: p = 1 is logarithmic growth.  Measured on 40 random layouts: p in
# [0.90, 1.25]; a linear continuation gives p = 0, a bounded one p = 2 (calibration test below).
LATE_EXPONENT = (0.7, 1.6)


def theorem2_violations(tr) -> list[str]:
    cl = tr.classes
    out = []
    for n in range(cl.K):
        for l in cl.distinct_tokens(n):
            z = tr.z(n, l)
            tol = ATOL + RTOL * np.abs(z).max()
            if np.diff(z).min() < -tol:
                out.append(f"distinct token {l} of class {n} decreased by {-np.diff(z).min():.3g}")
            if cl.overlaps(n) and z[-1] - z[0] <= 10 * tol:
                out.append(f"distinct token {l} of class {n} did not grow: z(end)-z(0) = {z[-1] - z[0]:.3g}")
    if len(cl.common_tokens) == 1:
        l = cl.common_tokens[0]
        for n in range(cl.K):
            if cl.P[n, l] > 0:
                z = tr.z(n, l)
                tol = ATOL + RTOL * np.abs(z).max()
                if np.diff(z).max() > tol or z[-1] - z[0] >= -10 * tol:
                    out.append(f"common token {l} (row of class {n}) did not shrink: z(end)-z(0) = {z[-1] - z[0]:.3g}")
    return out


def _pairs(cl, min_gap=1e-3):
    for n in range(cl.K):
        d = cl.distinct_tokens(n)
        for i in range(len(d)):
            for j in range(len(d)):
                if i != j:
                    yield n, d[i], d[j]


def identity_residual(tr) -> float:
    worst = 0.0
    for n, l, lp in _pairs(tr.classes):
        C0 = tr.c(0)[n]
        r0 = (C0[l] / C0[lp]) ** 2 - 1
        if abs(r0) < 1e-3:          # r = 0 is a fixed point; the relative residual is meaningless there
            continue
        worst = max(worst, float(gain_identity_residual(tr, n, l, lp).max()))
    return worst


def scan_violations(tr) -> list[str]:
    cl = tr.classes
    out = []
    C = np.array([tr.c(i) for i in range(len(tr.t))])
    for n in range(cl.K):
        d = cl.distinct_tokens(n)            # increasing P(l|n)
        if len(d) < 2:
            continue
        star = d[-1]
        cd = C[:, n, d]
        if (cd.argmax(axis=1) != len(d) - 1).any():
            i = int(np.flatnonzero(cd.argmax(axis=1) != len(d) - 1)[0])
            out.append(f"class {n}: token {d[cd[i].argmax()]} beats the top-probability token {star} at t={tr.t[i]:.3g}")
        share = cd[:, -1] / cd.sum(axis=1)
        if cl.overlaps(n) and share[-1] <= share[0] + 1e-6:
            out.append(f"class {n}: dominant share did not grow ({share[0]:.4f} -> {share[-1]:.4f})")
        D = (cd[:, :-1] / cd[:, -1:]) / (cd[0, :-1] / cd[0, -1])     # relative ground kept, (nt, |d|-1)
        if (np.diff(D, axis=1) < -1e-9).any():
            i, j = map(int, np.argwhere(np.diff(D, axis=1) < -1e-9)[0])
            out.append(f"class {n}: at t={tr.t[i]:.3g} token {d[j + 1]} (higher P) lost more ground than {d[j]}")
    return out


def snap_profile(tr, n=0):
    """``(t_snap, rising, late_exponent, late_growth)`` for class ``n``'s dominant distinct token."""
    cl = tr.classes
    star = cl.distinct_tokens(n)[-1]
    return snap_profile_of(tr.t[1:], tr.z(n, star)[1:])


def snap_profile_of(t, z):
    """The snap statistics of a logit trajectory ``z(t)``:

    * ``t_snap``: where the speed ``dz/dt`` peaks;
    * ``rising``: the speed at least doubled over the decade before the peak (the fast phase);
    * ``late_exponent``: ``p`` in ``dz/dt ~ t^{-p}`` fitted on ``t >= 10 t_snap`` -- logarithmic growth
      ``z ≈ a + b ln t`` has ``p = 1``, linear growth ``p = 0``, a bounded approach ``z∞ - c/t`` ``p = 2``;
    * ``late_growth``: how much z still grew over that window.
    """
    zdot = np.gradient(z, t)
    i = int(np.argmax(zdot))
    t_snap = float(t[i])
    rising = bool(np.interp(np.log(t_snap / 10), np.log(t), zdot) <= zdot[i] / 2)
    late = t >= 10 * t_snap
    if late.sum() < 3:
        return t_snap, rising, np.nan, 0.0
    j = int(np.flatnonzero(late)[0])
    if np.any(zdot[late] <= 0):
        return t_snap, rising, np.inf, float(z[-1] - z[j])
    p = -np.polyfit(np.log(t[late]), np.log(zdot[late]), 1)[0]
    return t_snap, rising, float(p), float(z[-1] - z[j])


def snap_violations_of(t, z, t0) -> list[str]:
    t_snap, rising, p, late_growth = snap_profile_of(t, z)
    out = []
    if not (t0 / 4 <= t_snap <= 4 * t0) or t_snap >= t[-1] / 10:
        out.append(f"speed peak t_snap={t_snap:.3g} not within [t0/4, 4 t0] = [{t0 / 4:.3g}, {4 * t0:.3g}]")
    if not rising:
        out.append("dz/dt did not at least double over the decade before t_snap")
    if not LATE_EXPONENT[0] <= p <= LATE_EXPONENT[1]:
        out.append(f"after the snap dz/dt ~ t^-{p:.3g}: not logarithmic growth (exponent outside "
                   f"[{LATE_EXPONENT[0]}, {LATE_EXPONENT[1]}])")
    if late_growth <= 1e-6:
        out.append(f"z stopped growing after the snap ({late_growth:.3g})")
    return out


def snap_violations(tr, t0, n=0) -> list[str]:
    star = tr.classes.distinct_tokens(n)[-1]
    return snap_violations_of(tr.t[1:], tr.z(n, star)[1:], t0)


def _snap_times(t0):
    """Samples from t0/100 (the fast phase is resolved) to the budget 300 t0, log-spaced."""
    return np.concatenate([[0.0], np.geomspace(t0 / 100, 300 * t0, 70)])

