"""Render a run's HTML report from its collected data.

``python -m reports.generate RUN_DIR`` re-renders ``RUN_DIR/index.html`` from

* ``RUN_DIR/run.json`` -- the run (date, profile, seed, versions, workers, duration, command; the
  controller's view of every outcome), written by :mod:`reports.plugin`;
* ``RUN_DIR/data/*.jsonl`` -- one JSON line per test, one file per process that ran tests.

The page is one self-contained file: CSS inline, charts as inline SVG or base64 PNG ``data:`` URIs.
Sections (each an element with this id, which the tests check): ``run``, ``dashboard``, ``properties``,
``counterexamples``, ``relaxations``.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import jinja2

from reports.plugin import replay_command, rerun_command

SECTIONS = ("run", "dashboard", "properties", "counterexamples", "relaxations")
# Dashboard order and the paper each group belongs to; other groups follow alphabetically.
GROUPS = {
    "Theorem 1": "Li et al. 2024", "Theorem 2": "Li et al. 2024", "Automaton": "Li et al. 2024",
    "Section 5": "Li et al. 2024", "Scan and Snap": "Tian et al. 2023", "Relaxations": "Li et al. 2024",
    "Reference": "both", "Report": "suite",
}
# Shown even when no property ran, so a missing theorem is visible.
ALWAYS_SHOWN = ("Theorem 1", "Theorem 2", "Automaton", "Section 5")
# Generated-input statistics charted per property, in this order, with their display names.
INPUT_KEYS = {"K": "K (vocabulary)", "n": "n (samples)", "T": "T (length)", "n_sccs": "number of SCCs",
              "dim_sfin": "dim S_fin", "svm_norm": "||W^svm||"}
FAILED = ("failed", "error", "xpassed")


def load_run(run_dir) -> dict:
    """The run's metadata with ``tests``: every test's merged data, keyed by node id."""
    run_dir = Path(run_dir)
    run_file = run_dir / "run.json"
    run = json.loads(run_file.read_text()) if run_file.exists() else {}
    # A partial run.json (e.g. written by hand, or by an older plugin) still renders.
    run = {"run_id": run_dir.name, **RUN_DEFAULTS, **run}
    tests: dict[str, dict] = {}
    for path in sorted((run_dir / "data").glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            try:
                t = json.loads(line)
            except json.JSONDecodeError as exc:  # a worker killed mid-write: keep the rest
                print(f"tpg-report: skipping {path.name}:{n + 1}: {exc}", file=sys.stderr)
                continue
            tests[t["nodeid"]] = t
    # Tests the controller saw but no worker file describes (e.g. the worker crashed).
    for nodeid, o in (run.get("outcomes") or {}).items():
        if nodeid not in tests:
            tests[nodeid] = {"nodeid": nodeid, "outcome": o.get("outcome", "error"), "duration": o.get("duration", 0.0),
                             "text": o.get("text", "") or "no data from the worker (did it crash?)",
                             "worker": o.get("worker"), "hypothesis": [], "records": {}}
        elif o.get("outcome") in FAILED and tests[nodeid].get("outcome") not in FAILED:
            tests[nodeid]["outcome"] = o["outcome"]  # e.g. a teardown error only the controller saw
    run["tests"] = {nodeid: _normalize(t) for nodeid, t in tests.items()}
    return run


RUN_DEFAULTS = {"profile": "?", "derandomize": None, "seed": None, "seed_chosen_by_report": False, "args": [],
                "workers": 0, "versions": {}, "max_cards": 12, "outcomes": {}, "started": "?"}
TEST_DEFAULTS = {"worker": None, "outcome": "error", "duration": 0.0, "text": "", "doc": "", "reproduce_blob": None,
                 "printed_seed": None, "hypothesis": [], "records": {}}
CARD_DEFAULTS = {"title": "counterexample", "problem": None, "what_fails": "", "amount": float("nan"),
                 "problem_file": "", "replay": "", "graphs": None, "svm_tokens": None, "fin_tokens": None,
                 "curves": None}


def _normalize(t: dict) -> dict:
    """Fill the fields an older or partial line may lack, so the template can rely on them."""
    t = {**TEST_DEFAULTS, **t}
    t.setdefault("theorem", Path(t["nodeid"].split("::")[0]).stem)
    t["records"] = dict(t["records"] or {})
    t["records"]["counterexample"] = [{**CARD_DEFAULTS, **c} for c in t["records"].get("counterexample") or []]
    return t


def _hypothesis_summary(runs: list[dict]) -> dict | None:
    """Sum the statistics of every Hypothesis run inside one test (usually exactly one)."""
    runs = [r for r in runs if "error" not in r]
    if not runs:
        return None
    out = {k: sum(r.get(k, 0) for r in runs) for k in ("examples", "invalid", "failing", "shrink_steps",
                                                       "shrinks_successful", "event_cases")}
    out["stopped_because"] = "; ".join(dict.fromkeys(r.get("stopped_because", "") for r in runs if r.get("stopped_because")))
    events: dict[str, int] = defaultdict(int)
    for r in runs:
        for k, v in (r.get("events") or {}).items():
            events[k] += v
    out["events"] = sorted(events.items(), key=lambda kv: (-kv[1], kv[0]))
    phases: dict[str, dict] = {}
    for r in runs:
        for name, p in (r.get("phases") or {}).items():
            acc = phases.setdefault(name, defaultdict(float))
            for k, v in p.items():
                acc[k] += v
    out["phases"] = {k: dict(v) for k, v in phases.items()}
    out["runs"] = len(runs)
    not_judged: dict[str, int] = defaultdict(int)
    for r in runs:
        for k, v in (r.get("not_judged") or {}).items():
            not_judged[k] += v
    out["judged"] = sum(r.get("judged", r.get("examples", 0)) for r in runs)
    out["not_judged"] = sorted(not_judged.items(), key=lambda kv: (-kv[1], kv[0]))
    out["generated"] = out["judged"] + sum(not_judged.values())
    return out


def _samples(problem: dict | None) -> list[dict]:
    """Token sequences of a problem file for display: tokens, query (last), label."""
    if not problem:
        return []
    seqs, labels = problem.get("sequences") or [], problem.get("labels") or []
    return [{"tokens": list(s), "label": labels[i] if i < len(labels) else None} for i, s in enumerate(seqs)]


def _card(test: dict, ce: dict, run_dir: Path, full: bool) -> dict:
    from reports import charts  # matplotlib: imported only when something is drawn

    card = dict(ce)
    card["nodeid"] = test["nodeid"]
    card["test_outcome"] = test.get("outcome")
    card["samples"] = _samples(ce.get("problem"))
    card["problem_json"] = json.dumps(ce.get("problem"), indent=None) if ce.get("problem") else ""
    pf = Path(ce.get("problem_file") or "")
    try:
        card["problem_link"] = str(pf.resolve().relative_to(run_dir.resolve())) if pf.name else None
    except ValueError:
        card["problem_link"] = None  # outside the run folder: shown as a path only
    card["full"] = full
    if full:
        card["tpg_png"] = charts.tpg_png(ce.get("graphs") or {})
        card["heat_png"] = charts.heatmaps_png({r"$W^{svm}$ as $E\,W E^\top$": ce.get("svm_tokens"),
                                                r"$W^{fin}$ as $E\,W E^\top$": ce.get("fin_tokens")})
        card["curves_png"] = charts.curves_png(ce.get("curves") or {})
    return card


def build_context(run: dict, run_dir: Path) -> dict:
    """Everything the template needs, computed once here so the template stays declarative."""
    tests = sorted(run["tests"].values(), key=lambda t: (_group_key(t.get("theorem", "")), t["nodeid"]))
    max_cards = int(run.get("max_cards") or 12)
    groups: dict[str, dict] = {g: _empty_group(g) for g in ALWAYS_SHOWN}
    cards, relaxations, failures, pending = [], [], [], []
    targets: dict[str, dict] = {}  # best score per hypothesis.target label, over the whole run
    seen_relaxations: dict = {}
    for i, t in enumerate(tests):
        rec = t.get("records") or {}
        t["anchor"] = f"t{i}"
        t["hyp"] = _hypothesis_summary(t.get("hypothesis") or [])
        t["failed"] = t.get("outcome") in FAILED
        t["replay"] = replay_command(run, t["nodeid"], t.get("reproduce_blob") if t["failed"] else None)
        inputs = rec.get("inputs") or []
        t["hists"], t["ranges"] = _input_charts(inputs)
        t["n_inputs"] = len(inputs)
        t["metrics"] = [m for m in rec.get("metrics") or []]
        t["figures"] = [_figure_within_budget(f) for f in rec.get("figure") or []]
        g = groups.setdefault(t.get("theorem", "?"), _empty_group(t.get("theorem", "?")))
        g["properties"] += 1
        g["examples"] += (t["hyp"] or {}).get("generated", 0)
        g["judged"] += (t["hyp"] or {}).get("judged", 0)
        t["judged_floor"] = (t.get("judged") or {}).get("floor")
        t["targets"] = sorted(rec.get("targets") or [], key=lambda e: e["label"])
        for e in t["targets"]:
            best = targets.setdefault(e["label"], {**e, "nodeid": t["nodeid"], "anchor": t["anchor"]})
            if e["score"] > best["score"]:
                best.update(e, nodeid=t["nodeid"], anchor=t["anchor"])
        g["time"] += float(t.get("duration") or 0.0)
        bucket = "failed" if t["failed"] else ("passed" if t.get("outcome") in ("passed", "xfailed") else "skipped")
        g[bucket] += 1
        t["cards"] = []
        pending += [(t, ce) for ce in rec.get("counterexample") or []]
        for r in rec.get("relaxation") or []:
            # A property may record the same row once per example: show it once, with a count.
            key = (t["nodeid"], *(str(r.get(k, "")) for k in ("theorem", "relaxation", "expected", "outcome", "reason")))
            if key in seen_relaxations:
                seen_relaxations[key]["count"] += 1
                continue
            row = {**r, "nodeid": t["nodeid"], "count": 1,
                   "matches": str(r.get("outcome", "")).strip().lower() == str(r.get("expected", "")).strip().lower()}
            seen_relaxations[key] = row
            relaxations.append(row)
        t["falsifying"] = _falsifying_example(t.get("text") or "")
        t["reason"] = _reason(t.get("text") or "") if t["failed"] else ""
        if t["failed"]:
            failures.append(t)
    # Failing tests' cards first, so they get the drawings when there are more cards than the budget.
    pending.sort(key=lambda tc: not tc[0]["failed"])
    for i, (t, ce) in enumerate(pending):
        card = _card(t, ce, run_dir, full=i < max_cards)
        card["n"] = i + 1
        cards.append(card)
        t["cards"].append(card)
    group_rows = sorted(groups.values(), key=lambda g: _group_key(g["name"]))
    totals = {k: sum(g[k] for g in group_rows) for k in ("properties", "examples", "judged", "passed", "failed", "skipped", "time")}
    return {
        "run": run, "tests": tests, "groups": group_rows, "totals": totals, "cards": cards,
        "relaxations": relaxations, "failures": failures, "sections": SECTIONS,
        "targets": [targets[k] for k in sorted(targets)],
        "rerun": run.get("rerun") or rerun_command(run), "max_cards": max_cards,
        "n_failed": sum(t["failed"] for t in tests), "run_dir": str(run_dir),
        "observations": _observations(run_dir),
        "sweeps": _sweeps(run, run_dir),
    }


SWEEP_DIR_ENV = "ATTN_SUITE_SWEEPS"  # folder of sweep files (default: <rootdir>/sweeps, python -m theory sweep's)


def _sweeps(run: dict, run_dir: Path) -> list[dict]:
    """Phase diagrams of the sweep files present (``<run>/sweeps/*.jsonl`` and ``<rootdir>/sweeps/*.jsonl``,
    or ``$ATTN_SUITE_SWEEPS``); a file that cannot be drawn is listed with the reason."""
    import base64
    import os

    folders = [run_dir / "sweeps"]
    if os.environ.get(SWEEP_DIR_ENV):
        folders.append(Path(os.environ[SWEEP_DIR_ENV]))
    elif run.get("rootdir"):
        folders.append(Path(run["rootdir"]) / "sweeps")
    out = []
    for f in sorted({p.resolve() for d in folders if d.is_dir() for p in d.glob("*.jsonl")}):
        entry = {"file": str(f), "name": f.stem}
        try:
            from theory.run.sweep import figure, read_records

            recs = read_records(f)
            counts: dict = {}
            for r in recs:
                counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
            entry.update(runs=len(recs), verdicts=counts,
                         png=base64.b64encode(figure(recs)).decode("ascii") if recs else None)
        except Exception as exc:  # a sweep file never breaks the report
            entry["error"] = f"{type(exc).__name__}: {exc}"
        out.append(entry)
    return out


def _observations(run_dir: Path) -> dict | None:
    """The run's Hypothesis observation files (Tyche's input), with how many test cases they hold."""
    files = sorted((run_dir / "observations").glob("*_testcases.jsonl"))
    if not files:
        return None
    cases = 0
    for f in files:
        with open(f, "rb") as fh:
            cases += sum(1 for _ in fh)
    return {"files": [f"observations/{f.name}" for f in files], "cases": cases}


def _reason(text: str) -> str:
    """The first line of the error pytest reports (its ``E`` lines), else the last line of the text."""
    for line in text.splitlines():
        if line.startswith("E ") and line[1:].strip():
            return line[1:].strip()[:300]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


_FALSIFYING_START = re.compile(r"^(E\s+)?(Falsifying (?:explicit )?example|Failing test case):")


def _falsifying_example(text: str, max_lines: int = 40) -> str | None:
    """Hypothesis's "Falsifying example: test(...)" (or "Failing test case: ...") block from a failure's
    text, with pytest's ``E`` prefixes removed."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        found = _FALSIFYING_START.match(line)
        if not found:
            continue
        prefix = len(found.group(1) or "")
        block = []
        for line in lines[i:i + max_lines]:
            line = line[prefix:] if line.startswith("E") else line
            if block and (not line.strip() or line.startswith(("Explanation:", "You can reproduce"))):
                break
            block.append(line.rstrip())
            if line == ")":
                break
        return "\n".join(block)
    return None


FIGURE_MAX_CHARS = 400_000  # one recorded figure (base64 PNG or SVG text); larger ones are left out


def _figure_within_budget(fig: dict) -> dict:
    size = len(fig.get("png") or fig.get("svg") or "")
    if size <= FIGURE_MAX_CHARS:
        return fig
    return {"name": fig.get("name", "figure"), "omitted": f"left out: {size / 1e3:.0f} kB, over the "
                                                          f"{FIGURE_MAX_CHARS / 1e3:.0f} kB per-figure budget"}


def _input_charts(inputs: list[dict]) -> tuple[list[str], str]:
    """Histograms (SVG) of each recorded input statistic, and a one-line summary of their ranges."""
    from reports.charts import histogram_svg

    keys = [k for k in INPUT_KEYS if any(row.get(k) is not None for row in inputs)]
    keys += sorted({k for row in inputs for k, v in row.items() if v is not None} - set(keys))
    hists, ranges = [], []
    for k in keys:
        values = [row[k] for row in inputs if row.get(k) is not None]
        hists.append(histogram_svg(values, INPUT_KEYS.get(k, k)))
        lo, hi = min(values), max(values)
        name = {"n_sccs": "SCCs", "dim_sfin": "dim S_fin", "svm_norm": "||W^svm||"}.get(k, k)
        ranges.append(f"{name} {_num(lo)}" if lo == hi else f"{name} {_num(lo)}–{_num(hi)}")
    return hists, ", ".join(ranges)


def _empty_group(name: str) -> dict:
    return {"name": name, "paper": GROUPS.get(name, ""), "properties": 0, "examples": 0, "judged": 0, "passed": 0,
            "failed": 0, "skipped": 0, "time": 0.0}


def _group_key(name: str):
    order = list(GROUPS)
    return (order.index(name), "") if name in order else (len(order), name)


def _env() -> jinja2.Environment:
    # Templates are found next to this file, not through the package spec: a report root named
    # "reports" in the working directory can shadow the package as a namespace package.
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).resolve().parent / "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["seconds"] = _seconds
    env.filters["num"] = _num
    return env


def _seconds(x) -> str:
    x = float(x or 0.0)
    return f"{x * 1000:.0f} ms" if x < 1 else (f"{x:.1f} s" if x < 120 else f"{x / 60:.1f} min")


def _num(x) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, int):
        return str(x)
    try:
        return f"{float(x):.4g}"
    except (TypeError, ValueError):
        return str(x)


def render(run_dir, out=None) -> Path:
    """Write the report of ``run_dir`` (default ``run_dir/index.html``) and return its path."""
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    html = _env().get_template("index.html.j2").render(**build_context(run, run_dir))
    out = Path(out) if out else run_dir / "index.html"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)  # a reader never sees a half-written page
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reports.generate", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", help="a run folder, e.g. reports/latest")
    ap.add_argument("-o", "--out", help="output file (default RUN_DIR/index.html)")
    args = ap.parse_args(argv)
    if not (Path(args.run_dir) / "data").is_dir() and not (Path(args.run_dir) / "run.json").exists():
        print(f"{args.run_dir}: not a run folder (no run.json or data/)", file=sys.stderr)
        return 2
    out = render(args.run_dir, args.out)
    print(f"{out} ({out.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
