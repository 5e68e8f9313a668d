"""Tian et al. 2023 ("Scan and Snap"): the theory simulations of Fig. 3, Fig. 8 and Fig. 9
(``python -m theory reproduce tian-fig3|tian-fig8|tian-fig9``).

The authors never published the code of these simulations, and the plain-text extraction of the paper
this project works from lost nearly every symbol.  What follows is reconstructed from the equations that
survive, the structure of the proofs, docs/theory.md (Scan and Snap) and the model of
:mod:`theory.tian2023.model`; each reconstruction says where it comes from.

Fig. 8 -- Lemma 7 and Remark 2 (Appendix D.3).  Lemma 5 gives, for one class with ``W(0) = 0`` and a frozen
``Z`` (orthogonal classes), the decoder row ``w_n(t) = h_t (M e_n - 1)`` (reconstructed: the row gains
``eta_Y (e_n - alpha_n)``, which keeps the symmetry ``a e_n + b (1 - e_n)`` and sums to zero), hence
``alpha_nn = 1 / (1 + (M-1) e^{-M h})`` and Eqn. 33::

    h_{t+1} = h_t + eta_Y / ((M - 1) + exp(M h_t)),   h_0 = 0          (discrete, SGD steps)

Lemma 6 / Eqn. 45, its continuous counterpart ``dh*/dt = eta_Y / ((M-1) + e^{M h*})``, integrates to::

    (M - 1) h*_t + (exp(M h*_t) - 1) / M = eta_Y t                      (solved by Newton, :func:`h_continuous`)

Lemma 7, as reconstructed from its proof ("we claim h*_t <= h_t ... the gap between h_t and h*_t will not grow
if it is smaller than [one step]"; (b) assumes a gap ``>= epsilon`` for all ``t`` and derives a
contradiction): (a) ``0 <= h_t - h*_t <= eta_Y / M`` for every ``t`` (``eta_Y / M`` is the first, and
largest, step of Eqn. 33); (b) ``h_t - h*_t -> 0`` (judged as a decay over the last decade of a budget of
``1000 t_0`` steps, at least 1e4).  Remark 2 ("by computing the second-order derivative of h*") is read as:
after ``t_0`` of Lemma 8 the gap never grows -- judged for ``M >= 8`` (Remark 3 assumes a large ``M``; for
``M <= 5`` and ``eta_Y <= 1`` the gap does grow after ``t_0``, by at most 6e-3, measured).  Lemma 8's ``t_0``: ``x = M h`` solves
``(M-1) x = e^x`` at its larger root ``x_0 ~ ln M + ln ln M`` (the linear and exponential terms of Eqn. 45
balance); ``t_0 = ((M-1) h_0 + (e^{x_0} - 1)/M) / eta_Y ~ 2 ln M / eta_Y`` per class (``2 K ln M / eta_Y``
when ``K`` classes are sampled uniformly: docs/theory.md, :func:`theory.tian2023.model.snap_time_estimate`).

Fig. 3 -- Sec. 6: "numerical simulation results of the growth rate [of the dominant distinct token] ...
smaller eta_Y given fixed eta_Z leads to later transition and larger [B_n(t)] (and [z_ml(t)])".  The values
of ``M`` and ``eta_Z`` the paper used are lost; here: the Syn-Small layout (``syn_layout(1, 2, 10, 10)``,
M = 30, K = 2), ``eta_Z = 1``, ``eta_Y in {1, 2, 5, 10}``, the tied-decoder dynamics of the paper's analysis
(:func:`theory.tian2023.model.integrate`, ``decoder="tied"``) to a common budget ``300 t_0(eta_Y = 1)``.  The
snap time is where ``dz*/dt`` peaks (as in ``properties/tian2023/test_theorems.py``).

Fig. 9 -- Appendix F, after Eqn. 131: "[B_n(t_0)] just depends on [two quantities], and thus fixing [one] and
changing [the other] will not influence the value of [B_n(t_0)], which means that the main difference ...
arises at the stage [t >= t_0]".  Reconstruction: with ``gamma(t) ~ eta_Y t / K`` before ``t_0``
(Theorem 1(b)) the early growth is ``B_n(t_0) ~ eta_Z int_0^{t_0} gamma ~ K (ln M)^2 eta_Z / eta_Y`` up to
constants (a scaling argument only; no value is printed): it
depends on ``eta_Z / eta_Y`` (and ``M``, ``K``) only, so runs at a fixed ratio ``eta_Z / eta_Y`` and
different ``eta_Y`` reach the same value at their own ``t_0`` and separate afterwards, when compared at a
common time (the run with the larger rates is further along: insight (b) of Sec. 6, "scaling up both
learning rates leads to larger B_n(t) ... sparser attention").  The same measurement at a fixed ``eta_Z``
(Fig. 3's setting) gives early values ``~ 1/eta_Y``: the contrast the figure shows next to it.  (Another
reading -- fixed ``eta_Z``, values compared at one common early time, the slowest run's ``t_0`` -- is printed as
``common_early_spread``; it is not what the surviving equations give, and it is not judged.)  Note: in the
continuous-time dynamics rescaling time by ``eta_Y`` makes the fixed-ratio statement exact (both layers
move by ``eta_Y dt`` times a function of the state and of ``eta_Z / eta_Y``); the integrator's accuracy
(rtol 1e-6) is what limits the agreement.
"""
from __future__ import annotations

import math
import time

import numpy as np

from theory.tian2023.model import ScanSnapError, integrate, mean_distinct_entropy, snap_time_estimate, syn_layout
from theory.tian2023.experiments import _int_arg

FIG3_ETA_Y = (1.0, 2.0, 5.0, 10.0)
FIG3_ETA_Z = 1.0
FIG9_RATIO = 0.1                     # eta_Z / eta_Y
FIG8_M = (10, 100, 1000)
FIG8_ETA_Y = (0.1, 1.0, 10.0)
FIG8_STEPS = 100_000
BUDGET = 300                          # t_end = BUDGET * t_0 of the slowest run


# ------------------------------------------------------------------------------------------ Fig. 8


def h_discrete(M: int, eta_y: float, steps: int) -> np.ndarray:
    """Eqn. 33: ``h_0 = 0``, ``h_{t+1} = h_t + eta_Y / ((M-1) + exp(M h_t))``; returns ``h_0 .. h_steps``."""
    _check_m_eta(M, eta_y)
    h = np.empty(int(steps) + 1)
    x = 0.0
    h[0] = 0.0
    for t in range(int(steps)):
        x += eta_y / ((M - 1) + math.exp(M * x))
        h[t + 1] = x
    return h


def h_continuous(M: int, eta_y: float, t) -> np.ndarray:
    """Eqn. 45: the ``h*`` with ``(M-1) h* + (e^{M h*} - 1)/M = eta_Y t`` (Newton from below, to rounding)."""
    _check_m_eta(M, eta_y)
    rhs = eta_y * np.asarray(t, dtype=float)
    # start above the root (each term alone reaching eta_Y t over-estimates h*): Newton on this convex
    # increasing function then decreases monotonically to the root
    h = np.minimum(rhs / (M - 1), np.log1p(M * rhs) / M)
    for _ in range(200):
        e = np.exp(M * h)
        f = (M - 1) * h + (e - 1.0) / M - rhs
        step = f / ((M - 1) + e)
        h = h - step
        if np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, np.abs(h))):
            break
    return h


def lemma8_t0(M: int, eta_y: float) -> float:
    """Lemma 8's ``t_0`` for one class: ``x_0`` = the larger root of ``(M-1) x = e^x`` (``M >= 4``; for smaller
    ``M`` there is no root and the exponential term dominates from the start: ``x_0 = 1``)."""
    _check_m_eta(M, eta_y)
    if (M - 1) < math.e:               # (M-1) x < e^x everywhere
        x = 1.0
    else:
        x = math.log(M)
        for _ in range(200):
            x = math.log((M - 1) * x)
    return ((M - 1) * x / M + math.expm1(x) / M) / eta_y


def gap_profile(M: int, eta_y: float, steps: int, *, h=None, hs=None) -> dict:
    """The Fig. 8 quantities: ``delta_t = h_t - h*_t`` along Eqn. 33, against Lemma 7 / Remark 2.  ``h`` / ``hs``
    replace the discrete / continuous solution (calibration: a planted wrong recursion must be rejected)."""
    h = h_discrete(M, eta_y, steps) if h is None else np.asarray(h, float)
    hs = h_continuous(M, eta_y, np.arange(steps + 1)) if hs is None else np.asarray(hs, float)
    d = h - hs
    t0 = lemma8_t0(M, eta_y)
    after = d[min(steps, int(math.ceil(t0))):]
    inc = np.diff(after)
    # rounding of h and h* (both ~ ln(M eta t)/M late) bounds what "never grows" can mean
    noise = 64 * np.finfo(float).eps * max(1.0, float(np.abs(h).max()))
    return {"M": M, "eta_y": eta_y, "steps": steps, "t0": t0, "bound": eta_y / M,
            "min_gap": float(d.min()), "max_gap": float(d.max()), "argmax_gap": int(d.argmax()),
            "final_gap": float(d[-1]), "final_h": float(h[-1]),
            "last_decade_ratio": float(d[-1] / d[steps // 10]) if d[steps // 10] > 0 else float("inf"),
            "max_increase_after_t0": float(inc.max()) if len(inc) else 0.0, "noise": noise,
            "_t": np.arange(steps + 1), "_gap": d, "_h": h, "_hs": hs}


REMARK2_MIN_M = 8        # Remark 3 assumes a large M; measured: the gap can grow after t_0 for M <= 5 (by <= 6e-3)
DECADE_DECAY = 0.2       # Lemma 7(b) on a budget: over the last decade the gap shrinks >= 5x (1/t decay: 10x)


def lemma7_violations(p: dict, *, remark2: bool | None = None) -> list[str]:
    """Lemma 7 (a) ``0 <= delta <= eta_Y/M``; (b) ``delta -> 0``, judged on a finite budget as a decay: over the last
    decade of steps the gap shrinks by at least ``1/DECADE_DECAY`` (it decays like the step, ``~1/t``); Remark 2
    (judged when ``M >= REMARK2_MIN_M`` unless ``remark2`` says otherwise): after ``t_0`` the gap never grows."""
    out = []
    tol = p["noise"]
    if remark2 is None:
        remark2 = p["M"] >= REMARK2_MIN_M
    if p["min_gap"] < -tol:
        out.append(f"Lemma 7(a): h_t < h*_t (gap {p['min_gap']:.3g})")
    if p["max_gap"] > p["bound"] + tol:
        out.append(f"Lemma 7(a): gap {p['max_gap']:.4g} above eta_Y/M = {p['bound']:.4g}")
    if not p["last_decade_ratio"] <= DECADE_DECAY:
        out.append(f"Lemma 7(b): gap not vanishing (final {p['final_gap']:.3g}, x{p['last_decade_ratio']:.3g} over the "
                   f"last decade, need <= {DECADE_DECAY})")
    if remark2 and p["max_increase_after_t0"] > tol:
        out.append(f"Remark 2: after t_0 = {p['t0']:.3g} the gap grew by {p['max_increase_after_t0']:.3g}")
    return out


def tian_fig8(args) -> dict:
    steps = _int_arg(args, "steps", FIG8_STEPS, 10)
    t0 = time.perf_counter()
    rows = []
    for M in FIG8_M:
        for ey in FIG8_ETA_Y:
            p = gap_profile(M, ey, steps)
            rows.append({k: (round(v, 8) if isinstance(v, float) else v) for k, v in p.items() if not k.startswith("_")}
                        | {"violations": lemma7_violations(p)})
    out = {"experiment": "tian-fig8", "steps": steps,
           "paper": "Lemma 7: h_t - h*_t bounded (a) and vanishing (b); Remark 2: no growth after t_0; "
                    "the paper prints no numbers for Fig. 8", "runs": rows,
           "runtime_s": round(time.perf_counter() - t0, 2)}
    return out


def fig8_figure(result: dict) -> bytes:
    plt = _pyplot()
    rows = result["runs"]
    Ms = sorted({r["M"] for r in rows})
    fig, axes = plt.subplots(1, len(Ms), figsize=(4.2 * len(Ms), 3.4), squeeze=False)
    for i, M in enumerate(Ms):
        ax = axes[0, i]
        for r in (r for r in rows if r["M"] == M):
            p = gap_profile(M, r["eta_y"], min(result["steps"], 20_000))
            t = p["_t"][1:]
            line, = ax.loglog(t, np.maximum(p["_gap"][1:], 1e-18), label=f"eta_Y={r['eta_y']:g}")
            ax.axhline(p["bound"], color=line.get_color(), ls=":", lw=0.8)
            ax.axvline(p["t0"], color=line.get_color(), ls="--", lw=0.6)
        ax.set_title(f"M={M}: h_t - h*_t (dotted: eta_Y/M, dashed: t_0)", fontsize=8)
        ax.set_xlabel("t (steps)")
        ax.legend(fontsize=7)
    return _png(fig)


# ------------------------------------------------------------------------------------------ Fig. 3 / Fig. 9


def dominant_run(classes, eta_y: float, eta_z: float, t_end: float, t_first: float, n_eval: int = 80, n: int = 0):
    """Tied-decoder dynamics; ``(t, z*(t), trajectory)`` for class ``n``'s dominant distinct token."""
    te = np.concatenate([[0.0], np.geomspace(t_first, t_end, n_eval)])
    tr = integrate(classes, t_end, eta_y=eta_y, eta_z=eta_z, decoder="tied", t_eval=te)
    star = classes.distinct_tokens(n)[-1]
    return tr.t, tr.z(n, star), tr


def snap_time(t: np.ndarray, z: np.ndarray) -> float:
    """Where ``dz/dt`` peaks (the end of the fast phase)."""
    zdot = np.gradient(z[1:], t[1:])
    return float(t[1:][int(np.argmax(zdot))])


def rate_sweep(classes, runs, *, budget: float = BUDGET, n_eval: int = 80) -> list[dict]:
    """For each ``(eta_Y, eta_Z)``: ``t_0 = 2 K ln M / eta_Y``, the snap time, the dominant logit at the run's
    own ``t_0`` (the early-stage value) and at the common budget ``t_end = budget * max t_0``, the distinct-token
    entropy at ``t_end``."""
    t0s = [snap_time_estimate(classes, ey) for ey, _ in runs]
    t_end = budget * max(t0s)
    t_first = min(t0s) / 100
    out = []
    for (ey, ez), t0 in zip(runs, t0s):
        t, z, tr = dominant_run(classes, ey, ez, t_end, t_first, n_eval)
        out.append({"eta_y": ey, "eta_z": ez, "t0": t0, "t_snap": snap_time(t, z),
                    "z_at_t0": float(np.interp(t0, t, z)), "z_at_common_t0": float(np.interp(max(t0s), t, z)),
                    "z_end": float(z[-1]), "t_end": t_end,
                    "entropy_end": mean_distinct_entropy(tr.c(), classes), "_t": t.tolist(), "_z": z.tolist()})
    return out


def fig3_violations(rows: list[dict]) -> list[str]:
    """Fig. 3 at a fixed ``eta_Z``, rows in increasing ``eta_Y``: a smaller ``eta_Y`` snaps strictly later, reaches
    a strictly larger dominant logit and a strictly lower distinct-token entropy at the common budget."""
    out = []
    for a, b in zip(rows, rows[1:]):           # a: smaller eta_Y
        tag = f"eta_Y {a['eta_y']:g} vs {b['eta_y']:g}"
        if not a["t_snap"] > b["t_snap"]:
            out.append(f"{tag}: smaller eta_Y did not snap later ({a['t_snap']:.3g} vs {b['t_snap']:.3g})")
        if not a["z_end"] > b["z_end"]:
            out.append(f"{tag}: smaller eta_Y did not reach a larger logit ({a['z_end']:.4g} vs {b['z_end']:.4g})")
        if not a["entropy_end"] < b["entropy_end"]:
            out.append(f"{tag}: smaller eta_Y not sparser (entropy {a['entropy_end']:.4f} vs {b['entropy_end']:.4f})")
    return out


EARLY_SPREAD = 0.01      # fig. 9: the early-stage values agree to 1% (integrator rtol 1e-6; fixed eta_Z: ~10x apart)
LATE_SPREAD = 0.05       # ... and separate by more than 5% at the common budget


def spread(v) -> float:
    v = np.asarray(v, float)
    return float((v.max() - v.min()) / max(abs(v.mean()), 1e-300))


def fig9_violations(rows: list[dict]) -> list[str]:
    """Fig. 9, rows in increasing ``eta_Y``: the dominant logit at each run's own ``t_0`` agrees across runs
    (relative spread <= EARLY_SPREAD), while at the common budget the runs separate (spread > LATE_SPREAD) with the
    larger rates further along."""
    out = []
    early = spread([r["z_at_t0"] for r in rows])
    late = spread([r["z_end"] for r in rows])
    if early > EARLY_SPREAD:
        out.append(f"early-stage value z*(t_0) depends on eta_Y: relative spread {early:.3g} > {EARLY_SPREAD}")
    if late <= LATE_SPREAD:
        out.append(f"runs did not separate later: relative spread of z*(t_end) {late:.3g} <= {LATE_SPREAD}")
    if any(not a["z_end"] < b["z_end"] for a, b in zip(rows, rows[1:])):
        out.append("at the common budget z* is not increasing with the (scaled) rates")
    return out


def tian_fig3(args) -> dict:
    classes = syn_layout(1, 2, 10, 10)
    t0 = time.perf_counter()
    rows = rate_sweep(classes, [(ey, FIG3_ETA_Z) for ey in FIG3_ETA_Y])
    out = {"experiment": "tian-fig3", "layout": "syn-small (M=30, K=2, 10 common, 10 distinct per class)",
           "decoder": "tied", "eta_z": FIG3_ETA_Z,
           "paper": "smaller eta_Y at fixed eta_Z: later transition and larger B_n(t), z_ml(t); "
                    "transition t_0 ~ 2 K ln M / eta_Y (the paper's M and eta_Z for Fig. 3 are lost)",
           "runs": [_public(r) | {"t_snap_over_t0": round(r["t_snap"] / r["t0"], 4)} for r in rows],
           "violations": fig3_violations(rows), "runtime_s": round(time.perf_counter() - t0, 2)}
    out["curves"] = [run_curve(r) for r in rows]
    return out


def tian_fig9(args) -> dict:
    classes = syn_layout(1, 2, 10, 10)
    t0 = time.perf_counter()
    fixed_ratio = rate_sweep(classes, [(ey, FIG9_RATIO * ey) for ey in FIG3_ETA_Y])
    fixed_z = rate_sweep(classes, [(ey, FIG9_RATIO * FIG3_ETA_Y[-1]) for ey in FIG3_ETA_Y])
    def summary(rows):
        return {"runs": [_public(r) for r in rows], "early_spread": round(spread([r["z_at_t0"] for r in rows]), 6),
                "common_early_spread": round(spread([r["z_at_common_t0"] for r in rows]), 6),
                "late_spread": round(spread([r["z_end"] for r in rows]), 6), "violations": fig9_violations(rows)}
    out = {"experiment": "tian-fig9", "layout": "syn-small (M=30, K=2)", "decoder": "tied",
           "paper": "B_n(t_0) depends only on eta_Z/eta_Y (and M, K): fixing the ratio and changing eta_Y does not "
                    "change it; runs differ only after t_0 (no numbers printed)",
           "fixed_ratio": {"eta_z_over_eta_y": FIG9_RATIO} | summary(fixed_ratio),
           "fixed_eta_z": {"eta_z": FIG9_RATIO * FIG3_ETA_Y[-1]} | summary(fixed_z),
           "runtime_s": round(time.perf_counter() - t0, 2)}
    out["curves"] = {"fixed_ratio": [run_curve(r) for r in fixed_ratio], "fixed_eta_z": [run_curve(r) for r in fixed_z]}
    return out


def run_curve(row: dict) -> dict:
    """One run's ``z*(t)`` as the JSON carries it: the figure is drawn from the printed result alone."""
    return {"eta_y": row["eta_y"], "eta_z": row["eta_z"], "t0": row["t0"], "t": row["_t"], "z": row["_z"]}


def fig3_figure(result: dict) -> bytes:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for c, r in zip(result["curves"], result["runs"]):
        t, z = np.asarray(c["t"][1:]), np.asarray(c["z"][1:])
        line, = axes[0].semilogx(t, z, label=f"eta_Y={c['eta_y']:g}")
        axes[0].axvline(r["t_snap"], color=line.get_color(), ls="--", lw=0.7)
        axes[1].loglog(t, np.maximum(np.gradient(z, t), 1e-12), color=line.get_color())
    axes[0].set_title(f"dominant logit z*(t), eta_Z={result['eta_z']:g} (dashed: snap)", fontsize=9)
    axes[0].set_xlabel("t (SGD-step units)")
    axes[0].legend(fontsize=7)
    axes[1].set_title("growth rate dz*/dt", fontsize=9)
    axes[1].set_xlabel("t")
    return _png(fig)


def fig9_figure(result: dict) -> bytes:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, key, title in ((axes[0], "fixed_ratio", f"eta_Z/eta_Y = {result['fixed_ratio']['eta_z_over_eta_y']:g}"),
                           (axes[1], "fixed_eta_z", f"eta_Z = {result['fixed_eta_z']['eta_z']:g}")):
        for c in result["curves"][key]:
            t, z = np.asarray(c["t"][1:]), np.asarray(c["z"][1:])
            line, = ax.semilogx(t, z, label=f"eta_Y={c['eta_y']:g}")
            ax.plot([c["t0"]], [np.interp(c["t0"], t, z)], "o", color=line.get_color())
        ax.set_title(f"{title}: z*(t), dots at each run's t_0", fontsize=9)
        ax.set_xlabel("t (SGD-step units)")
        ax.legend(fontsize=7)
    return _png(fig)


# ------------------------------------------------------------------------------------------ helpers


def _check_m_eta(M, eta_y):
    if isinstance(M, bool) or int(M) != M or M < 2:
        raise ScanSnapError(f"M: expected an integer >= 2, got {M!r}")
    if not (isinstance(eta_y, (int, float, np.floating, np.integer)) and math.isfinite(eta_y) and eta_y > 0):
        raise ScanSnapError(f"eta_y: expected a finite positive rate, got {eta_y!r}")


def _public(row: dict) -> dict:
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items() if not k.startswith("_")}


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _png(fig) -> bytes:
    from theory.tian2023.experiments import _png as png
    return png(fig)
