"""Charts for the HTML report, all returned ready to inline (no file, no network when opened).

* :func:`histogram_svg` -- hand-made SVG histogram of one generated-input statistic (many per report,
  so they must be tiny and crisp).
* :func:`tpg_png` -- drawings of token-priority graphs ``G^(k)``: SCCs coloured, ``=>`` edges dark.
* :func:`heatmaps_png` -- ``W^svm`` / ``W^fin`` in token space (``E W E^T``).
* :func:`curves_png` -- correlation and finite error against ``tau`` on log axes.

The matplotlib ones return base64 PNG (for ``data:`` URIs), drawn with the Agg backend at a low dpi
to keep the report small.
"""
from __future__ import annotations

import base64
import html
import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402

DPI = 88
# Cyclic SCCs get these colours in turn; singleton SCCs stay grey so the cycles stand out.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
           "#17becf", "#7f7f7f"]
SINGLETON = "#d0d0d0"


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


# --------------------------------------------------------------------------------------------------
# Histograms (SVG)
# --------------------------------------------------------------------------------------------------

def _fmt(x: float) -> str:
    if x == int(x) and abs(x) < 1e6:
        return str(int(x))
    return f"{x:.3g}"


def histogram_svg(values, label: str, width: int = 200, height: int = 110, bins: int = 12) -> str:
    """An SVG histogram of ``values`` (None/NaN dropped).  Integer data with few distinct values gets one
    bar per value, so e.g. K or the number of SCCs reads exactly."""
    xs = np.array([float(v) for v in values if v is not None and math.isfinite(float(v))])
    title = html.escape(label)
    pad_l, pad_b, pad_t = 26, 20, 16
    w, h = width - pad_l - 6, height - pad_b - pad_t
    parts = [f'<svg class="hist" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img"><title>{title}: {len(xs)} values</title>',
             f'<text x="{width / 2}" y="11" text-anchor="middle" class="ht">{title} '
             f'<tspan class="hn">(n={len(xs)})</tspan></text>']
    if len(xs) == 0:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" class="hn">no data</text></svg>')
        return "".join(parts)
    distinct = np.unique(xs)
    if np.all(distinct == np.round(distinct)) and len(distinct) <= 20:
        lo, hi = distinct.min(), distinct.max()
        edges = np.arange(lo - 0.5, hi + 1.5)
        labels = (_fmt(lo), _fmt(hi))
    else:
        lo, hi = xs.min(), xs.max()
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = np.linspace(lo, hi, bins + 1)
        labels = (_fmt(xs.min()), _fmt(xs.max()))
    counts, _ = np.histogram(xs, bins=edges)
    top = max(int(counts.max()), 1)
    bw = w / len(counts)
    for i, c in enumerate(counts):
        if c == 0:
            continue
        bh = h * c / top
        x0, y0 = pad_l + i * bw, pad_t + h - bh
        lo_i, hi_i = edges[i], edges[i + 1]
        parts.append(f'<rect x="{x0 + 0.5:.1f}" y="{y0:.1f}" width="{max(bw - 1, 0.8):.1f}" height="{bh:.1f}">'
                     f'<title>[{_fmt(lo_i)}, {_fmt(hi_i)}): {int(c)}</title></rect>')
    base = pad_t + h
    parts.append(f'<line x1="{pad_l}" y1="{base}" x2="{pad_l + w}" y2="{base}" class="ax"/>')
    parts.append(f'<text x="{pad_l - 3}" y="{pad_t + 8}" text-anchor="end" class="hn">{top}</text>')
    parts.append(f'<text x="{pad_l - 3}" y="{base}" text-anchor="end" class="hn">0</text>')
    parts.append(f'<text x="{pad_l + bw / 2}" y="{base + 13}" text-anchor="middle" class="hn">{labels[0]}</text>')
    parts.append(f'<text x="{pad_l + w - bw / 2}" y="{base + 13}" text-anchor="middle" class="hn">{labels[1]}</text>')
    parts.append("</svg>")
    return "".join(parts)


# --------------------------------------------------------------------------------------------------
# Token-priority graphs
# --------------------------------------------------------------------------------------------------

def _graph_layout(nodes, edges, sccs):
    """Positions by priority: the condensation's levels left to right (highest priority first), each SCC's
    tokens on a small circle.  Easier to read than a force layout because ``=>`` then points rightwards."""
    comp = {}
    for c, scc in enumerate(sccs):
        for t in scc:
            comp[t] = c
    for t in nodes:
        if t not in comp:
            comp[t] = len(sccs)
            sccs = [*sccs, [t]]
    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(sccs)))
    dag.add_edges_from((comp[i], comp[j]) for i, j in edges if comp[i] != comp[j])
    level = {}
    try:
        order = list(nx.topological_sort(dag))
    except nx.NetworkXUnfeasible:  # malformed input (SCCs given inconsistently): fall back to one column
        order = list(dag.nodes)
        dag = nx.DiGraph()
        dag.add_nodes_from(order)
    for c in order:
        level[c] = max((level[p] + 1 for p in dag.predecessors(c)), default=0)
    columns: dict[int, list[int]] = {}
    for c in order:
        columns.setdefault(level[c], []).append(c)
    pos = {}
    for lv, comps in columns.items():
        sizes = [len(sccs[c]) for c in comps]
        heights = [1.0 + 0.45 * (s > 1) * math.sqrt(s) for s in sizes]
        y = sum(heights) / 2
        for c, hgt in zip(comps, heights):
            cy = y - hgt / 2
            y -= hgt
            members = sorted(sccs[c])
            r = 0.0 if len(members) == 1 else 0.22 + 0.08 * len(members)
            for m, t in enumerate(members):
                a = 2 * math.pi * m / len(members) + math.pi / 2
                pos[t] = (2.0 * lv + r * math.cos(a), cy + r * math.sin(a))
    return pos, comp, sccs


def tpg_png(graphs: dict, max_graphs: int = 8, title_prefix: str = "G") -> str | None:
    """Draw up to ``max_graphs`` graphs ``{k: {"edges": [[i, j], ...], "sccs": [[...], ...]}}`` side by side.

    An edge ``i -> j`` means ``i`` has priority over ``j`` (label over other token).  Edges inside an SCC
    (``i ≍ j``) take the SCC's colour and are curved so both directions show; edges across SCCs
    (``i => j``) are dark.  SCCs are computed when not given."""
    if not graphs:
        return None
    keys = sorted(graphs, key=lambda k: (len(str(k)), str(k)))[:max_graphs]
    ncols = min(len(keys), 4)
    nrows = math.ceil(len(keys) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 2.9 * nrows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, k in zip(axes.flat, keys):
        g = graphs[k] or {}
        edges = [(int(i), int(j)) for i, j in (g.get("edges") or [])]
        sccs = [[int(t) for t in s] for s in (g.get("sccs") or [])]
        nodes = sorted({t for e in edges for t in e} | {t for s in sccs for t in s})
        if not sccs:
            dg = nx.DiGraph()
            dg.add_nodes_from(nodes)
            dg.add_edges_from(edges)
            sccs = [sorted(s) for s in nx.strongly_connected_components(dg)]
        pos, comp, sccs = _graph_layout(nodes, edges, sccs)
        cyclic = [c for c, s in enumerate(sccs) if len(s) > 1]
        colour = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(cyclic)}
        n_cross = 0
        for i, j in edges:
            inside = comp[i] == comp[j]
            n_cross += not inside
            ax.annotate("", xy=pos[j], xytext=pos[i],
                        arrowprops=dict(arrowstyle="-|>", shrinkA=9, shrinkB=9, mutation_scale=9,
                                        lw=1.0 if inside else 1.1,
                                        color=colour.get(comp[i], "#555") if inside else "#222",
                                        alpha=0.9 if inside else 0.75,
                                        connectionstyle="arc3,rad=0.25" if inside else "arc3,rad=0.06"))
        for t in nodes:
            c = comp[t]
            ax.scatter(*pos[t], s=300, color=colour.get(c, SINGLETON), edgecolors="#333", linewidths=0.8, zorder=3)
            ax.text(*pos[t], str(t), ha="center", va="center", fontsize=9, zorder=4,
                    color="white" if c in colour else "black", fontweight="bold")
        if pos:
            xs, ys = zip(*pos.values())
            ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
            ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
        ax.set_title(f"${title_prefix}^{{({k})}}$: {len(sccs)} SCCs, {n_cross} ⇒ edges", fontsize=10)
    if len(graphs) > len(keys):
        fig.suptitle(f"first {len(keys)} of {len(graphs)} graphs", fontsize=8)
    fig.tight_layout()
    return _png(fig)


# --------------------------------------------------------------------------------------------------
# Heatmaps and curves
# --------------------------------------------------------------------------------------------------

def heatmaps_png(mats: dict) -> str | None:
    """Side-by-side heatmaps of K x K token-space matrices ``{title: matrix}`` (None entries skipped).
    Entry (i, k) is ``e_i^T W e_k``: the score of token ``i`` when the query is ``k``."""
    mats = {t: np.asarray(m, dtype=float) for t, m in mats.items() if m is not None and np.size(m) > 0}
    if not mats:
        return None
    fig, axes = plt.subplots(1, len(mats), figsize=(3.6 * len(mats), 3.1), squeeze=False)
    for ax, (title, m) in zip(axes[0], mats.items()):
        if m.ndim != 2:
            m = np.atleast_2d(m)
        vmax = float(np.nanmax(np.abs(m))) if np.isfinite(m).any() else 1.0
        im = ax.imshow(m, cmap="RdBu_r", vmin=-vmax or -1, vmax=vmax or 1, interpolation="nearest")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("query k", fontsize=8)
        ax.set_ylabel("token i", fontsize=8)
        K = max(m.shape)
        if K <= 16:
            ax.set_xticks(range(m.shape[1]))
            ax.set_yticks(range(m.shape[0]))
        ax.tick_params(labelsize=7)
        if K <= 8:  # values written in the cells while they still fit
            for (i, k), v in np.ndenumerate(m):
                ax.text(k, i, f"{v:.1f}".replace("-0.0", "0.0"), ha="center", va="center", fontsize=7 if K <= 5 else 6,
                        color="white" if vmax and abs(v) > 0.6 * vmax else "black")
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=7)
    fig.tight_layout()
    return _png(fig)


def curves_png(curves: dict) -> str | None:
    """Correlation (log tau, linear y) and finite error (log-log) against ``tau``."""
    if not curves or not curves.get("tau"):
        return None
    tau = np.asarray(curves["tau"], dtype=float)
    panels = [(k, curves.get(k)) for k in ("correlation", "finite_error") if curves.get(k)]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(3.8 * len(panels), 2.7), squeeze=False)
    for ax, (name, ys) in zip(axes[0], panels):
        ys = np.asarray(ys, dtype=float)
        n = min(len(tau), len(ys))
        t, y = tau[:n], ys[:n]
        ok = (t > 0) & np.isfinite(y)
        if name == "finite_error":
            ok &= y > 0
        ax.plot(t[ok], y[ok], lw=1.4, color="#1f77b4" if name == "correlation" else "#d62728")
        if not ok.any():  # e.g. an acyclic problem: S_fin = {0}, the finite error is identically 0
            ax.text(0.5, 0.5, "identically 0" if name == "finite_error" else "no data", ha="center",
                    va="center", transform=ax.transAxes, fontsize=9, color="#666")
        else:
            ax.set_xscale("log")
        if name == "finite_error":
            if ok.any():
                ax.set_yscale("log")
            ax.set_title(r"$\|\Pi_{S_{fin}} W(\tau) - W^{fin}\|$", fontsize=10)
        else:
            ax.set_title(r"corr$(W(\tau), W^{svm})$", fontsize=10)
            ax.axhline(1.0, color="#999", lw=0.8, ls="--")
        ax.set_xlabel(r"$\tau$", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.25)
    fig.tight_layout()
    return _png(fig)
