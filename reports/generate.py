"""Render a run's HTML report from its collected data.

``python -m reports.generate RUN_DIR`` re-renders ``RUN_DIR/index.html`` from

* ``RUN_DIR/run.json`` -- the run (date, profile, seed, versions, workers, duration, command; the
  controller's view of every outcome), written by :mod:`reports.plugin`;
* ``RUN_DIR/data/*.jsonl`` -- one JSON line per test, one file per process that ran tests (``.jsonl.gz``
  is read too);
* ``RUN_DIR/observations/*_testcases.jsonl.gz`` -- Hypothesis's observations (counted and linked; plain
  ``.jsonl`` from a run still in progress or an older plugin is accepted).

The header's verdict is pytest's exit status: green exactly when it was 0.  A non-strict xfail that
passed (``xpassed``) does not fail a run, so it is listed apart, not counted as a failure.

The dashboard is grouped paper -> claim, from the registry of claims (:func:`theory.claims.all_claims`,
the only project module imported at report time; it is cheap): one card per claim with its statement,
its verdict rule, its calibrations and the outcomes of the tests in its ``properties`` files (a test
belongs to every claim that lists its file), with the examples not judged counted by reason and the
three-valued verdicts' UNDECIDED outcomes (a not-judged reason with the word "undecided") as
``undecided: N``.  Tests in no claim's files keep their groups: their ``theorem`` marker, else the folder
they live in (:func:`untagged_group`).  When :mod:`theory.claims` cannot be imported (a report rendered
outside the repository), the dashboard is the theorem-marker table alone, as before the registry.

The page is one self-contained file: CSS inline, charts as inline SVG or base64 PNG ``data:`` URIs.
Sections (each an element with this id, which the tests check): ``run``, ``dashboard``, ``properties``,
``counterexamples``, ``relaxations``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import defaultdict
from pathlib import Path, PurePosixPath

import jinja2

from reports.commands import replay_command, rerun_command

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
# Outcomes that fail a pytest run.  "xpassed" is a non-strict xfail that passed: pytest exits 0 (a strict
# one that passes is reported by pytest as "failed").
FAILED = ("failed", "error")
EXIT_MEANINGS = {0: "all tests passed", 1: "tests failed", 2: "interrupted", 3: "internal error",
                 4: "usage error", 5: "no tests collected"}
# Untagged tests, by the folder holding their module (properties/<folder>/test_*.py): the group's name
# and its paper.  A folder not listed gets its own readable name.
AREAS = {"li2024": ("Li et al. 2024, untagged", "Li et al. 2024"),
         "tian2023": ("Tian et al. 2023, untagged", "Tian et al. 2023"),
         "suite": ("Suite machinery", "suite"), "core": ("Core, untagged", "both"),
         "quality": ("Quality, untagged", "suite")}
# The flat layout (every module directly in properties/): the folder each module has moved to.
FLAT_MODULES = {**{m: "li2024" for m in ("theorem1", "theorem2", "automaton", "section5", "relaxations",
                                         "invariances", "reference", "reproductions", "pseudo", "engine",
                                         "certificates", "saturated_gradients")},
                "conic": "core", "problem_files": "core", "quality": "quality"}
TEST_ROOT = "properties"


def load_run(run_dir) -> dict:
    """The run's metadata with ``tests``: every test's merged data, keyed by node id."""
    run_dir = Path(run_dir)
    run_file = run_dir / "run.json"
    run = json.loads(run_file.read_text()) if run_file.exists() else {}
    # A partial run.json (e.g. written by hand, or by an older plugin) still renders.
    run = {"run_id": run_dir.name, **RUN_DEFAULTS, **run}
    tests: dict[str, dict] = {}
    for path in _jsonl_files(run_dir / "data", "*"):
        for n, line in enumerate(_read_text(path).splitlines()):
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


def _jsonl_files(folder: Path, stem: str) -> list[Path]:
    """``folder/<stem>.jsonl`` and ``.jsonl.gz`` files; where both exist for one name, the gzipped one."""
    found = {p.name[:-len(".gz")] if p.name.endswith(".gz") else p.name: p
             for p in sorted(folder.glob(f"{stem}.jsonl")) + sorted(folder.glob(f"{stem}.jsonl.gz"))}
    return [found[k] for k in sorted(found)]


def _open(path: Path):
    """A text reader of a ``.jsonl`` or ``.jsonl.gz`` file.  A gzip stream cut short (a killed process)
    yields what it holds and then stops."""
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def _read_text(path: Path) -> str:
    out = []
    with _open(path) as fh:
        try:
            for line in fh:
                out.append(line)
        except (EOFError, OSError) as exc:  # a truncated gzip file: keep what was read
            print(f"tpg-report: {path.name} is truncated ({exc}); read {len(out)} lines", file=sys.stderr)
    return "".join(out)


RUN_DEFAULTS = {"profile": "?", "derandomize": None, "seed": None, "seed_chosen_by_report": False, "args": [],
                "workers": 0, "versions": {}, "max_cards": 12, "outcomes": {}, "started": "?"}
TEST_DEFAULTS = {"worker": None, "outcome": "error", "duration": 0.0, "text": "", "doc": "", "reproduce_blob": None,
                 "printed_seed": None, "hypothesis": [], "records": {}, "xfail_reason": None}
CARD_DEFAULTS = {"title": "counterexample", "problem": None, "what_fails": "", "amount": float("nan"),
                 "problem_file": "", "replay": "", "graphs": None, "svm_tokens": None, "fin_tokens": None,
                 "curves": None}


def _normalize(t: dict) -> dict:
    """Fill the fields an older or partial line may lack, so the template can rely on them; set the
    test's ``group`` (its theorem, or for an untagged test :func:`untagged_group`)."""
    t = {**TEST_DEFAULTS, **t}
    module_stem = PurePosixPath(t["nodeid"].split("::")[0]).stem
    theorem = t.get("theorem")
    # Older plugins wrote the module's name as the "theorem" of an untagged test.
    tagged = t.get("tagged", bool(theorem) and theorem != module_stem) and bool(theorem)
    t["tagged"] = tagged
    if tagged:
        t["group"], t["paper"] = theorem, GROUPS.get(theorem) or area_of(t["nodeid"])[1]
    else:
        t["theorem"] = None
        t["group"], t["paper"] = untagged_group(t["nodeid"])
    t["records"] = dict(t["records"] or {})
    t["records"]["counterexample"] = [{**CARD_DEFAULTS, **c} for c in t["records"].get("counterexample") or []]
    return t


def _hypothesis_summary(runs: list[dict]) -> dict | None:
    """Sum the statistics of every Hypothesis run inside one test (usually exactly one)."""
    runs = [r for r in runs if "error" not in r]
    if not runs:
        return None
    out = {k: sum(r.get(k, 0) for r in runs) for k in ("examples", "invalid", "overrun", "failing", "shrink_steps",
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


def area_of(nodeid: str) -> tuple[str, str]:
    """``(folder key, paper)`` of a test from its node id's path, in either layout: the innermost folder
    below ``properties/`` (``properties/li2024/test_theorem1.py`` -> ``li2024``), or for a module directly
    in ``properties/`` the folder it moved to (``properties/test_theorem1.py`` -> ``li2024``; a Scan and
    Snap module -> ``tian2023``; any other -> ``suite``).  A module outside ``properties/`` is its own area.
    """
    parts = PurePosixPath(nodeid.split("::")[0].replace("\\", "/")).parts
    folders, stem = parts[:-1], PurePosixPath(parts[-1]).stem if parts else ""
    name = stem[len("test_"):] if stem.startswith("test_") else stem
    below = folders[folders.index(TEST_ROOT) + 1:] if TEST_ROOT in folders else None
    if below:  # properties/<folder>/.../test_x.py: the first folder that names an area, else the innermost
        key = next((f for f in below if f in AREAS), below[-1])
    elif below is not None:  # the flat layout: properties/test_x.py
        key = "tian2023" if name.startswith("scansnap") else FLAT_MODULES.get(name, "suite")
    else:  # outside properties/ (a synthetic suite, another root): the innermost folder, else the module
        key = folders[-1] if folders else name
    return key, AREAS[key][1] if key in AREAS else ""


def _readable(name: str) -> str:
    name = name.replace("_", " ").replace("-", " ").strip()
    return name[:1].upper() + name[1:] if name else "?"


def untagged_group(nodeid: str) -> tuple[str, str]:
    """``(group name, paper)`` of a test without a ``theorem`` marker: its area's name (``Suite machinery``,
    ``Li et al. 2024, untagged``, ...), never a raw module name."""
    key, paper = area_of(nodeid)
    return (AREAS[key][0] if key in AREAS else f"{_readable(key)}, untagged"), paper


def relaxation_matches(expected, outcome) -> bool:
    """Whether a relaxation row's outcome is the expected one: equal, or the expected word followed by
    details (``counterexample (n=2, K=3) at head.json`` is the outcome ``counterexample``)."""
    e, o = str(expected or "").strip().lower(), str(outcome or "").strip().lower()
    if not e:
        return False
    return o == e or (o.startswith(e) and not o[len(e)].isalnum())


def verdict(run: dict, n_failed: int, counts: dict) -> dict:
    """The header: pytest's exit status decides the colour (green exactly when it is 0); the counts say
    what happened.  Without a recorded exit status (a hand-written run.json) the failures decide.  Xpassed
    tests are left to their own note in the header (see the template), not counted here."""
    status = run.get("exitstatus")
    known = isinstance(status, int) and not isinstance(status, bool)
    ok = status == 0 if known else n_failed == 0
    total = counts["properties"]
    others = [f"{counts[k]} {k}" for k in ("skipped", "xfailed") if counts[k]]
    if n_failed:
        text = f"{n_failed} of {total} properties failed"
    elif known and status != 0:
        text = f"pytest exited with status {status} ({EXIT_MEANINGS.get(status, 'see the terminal')})"
        others = []
    elif counts["passed"] == total:
        text = f"all {total} properties passed"
    else:
        text = f"none of {total} properties failed: {counts['passed']} passed"
        others = [", ".join(others)] if others else []
        text += (", " + others[0]) if others else ""
        others = []
    if others:
        text += " (" + ", ".join(others) + ")"
    text += f" · exit status {status}" if known else " · exit status not recorded"
    return {"ok": ok, "known": known, "exitstatus": status, "text": text,
            "meaning": EXIT_MEANINGS.get(status, "") if known else ""}


OUTCOME_BUCKET = {"passed": "passed", "failed": "failed", "error": "failed", "xfailed": "xfailed",
                  "xpassed": "xpassed", "skipped": "skipped"}
BUCKETS = ("properties", "examples", "judged", "passed", "failed", "xfailed", "xpassed", "skipped", "time")


# A not-judged reason with this word counts a three-valued verdict's UNDECIDED outcome ("undecided at the
# maximum budget", "truth undecided at the maximum budget", "snap undecided at 3000 t_0", ...).
UNDECIDED = re.compile(r"\bundecided\b", re.IGNORECASE)


def load_claims() -> tuple[list[dict] | None, str]:
    """The registry's claims (:meth:`theory.core.claims.Claim.describe` of each), or ``None`` and why
    when :mod:`theory.claims` cannot be loaded (the report then falls back to the theorem-marker table)."""
    try:
        from theory.claims import all_claims

        return [c.describe() for c in all_claims()], ""
    except ImportError as exc:
        return None, f"theory.claims cannot be imported ({exc})"
    except Exception as exc:  # a broken registry never breaks the report
        return None, f"the claims registry failed: {type(exc).__name__}: {exc}"


def claim_file(nodeid: str, files) -> str | None:
    """The one of ``files`` (paths as a claim's ``properties`` lists them) that holds the test ``nodeid``:
    the node id's path equal to it, or ending with it (an absolute path, another root)."""
    path = nodeid.split("::")[0].replace("\\", "/")
    return next((f for f in files if path == f or path.endswith("/" + f)), None)


def _paper_key(claim: dict) -> str:
    return claim["name"].split(".", 1)[0]


def _tally() -> dict:
    return {"properties": 0, "examples": 0, "judged": 0, "passed": 0, "failed": 0, "xfailed": 0, "xpassed": 0,
            "skipped": 0, "time": 0.0}


def _count(acc: dict, t: dict) -> None:
    """Add test ``t`` (with its ``hyp`` summary) to the counts ``acc``."""
    acc["properties"] += 1
    acc["examples"] += (t["hyp"] or {}).get("generated", 0)
    acc["judged"] += (t["hyp"] or {}).get("judged", 0)
    acc["time"] += float(t.get("duration") or 0.0)
    acc[OUTCOME_BUCKET.get(t.get("outcome"), "failed")] += 1


def _state(acc: dict) -> str:
    """A group's or claim's colour: red when a test failed, grey when none ran, purple when one only
    xpassed, else green."""
    return "bad" if acc["failed"] else ("none" if not acc["properties"] else ("xpass" if acc["xpassed"] else "good"))


def _claim_context(claims: list[dict], tests: list[dict]) -> tuple[list[dict], list[dict]]:
    """Papers (each with its claim cards) and the claims' test files (each with its tests), and every
    test's ``claims`` and ``claim_file``."""
    files: dict[str, dict] = {}
    for c in claims:
        for f in c["properties"]:
            entry = files.setdefault(f, {"path": f, "slug": "file-" + re.sub(r"[^A-Za-z0-9]+", "-", f).strip("-"),
                                         "claims": [], "tests": [], **_tally()})
            entry["claims"].append(c["reference"] + (f" ({AREAS[_paper_key(c)][1]})" if _paper_key(c) in AREAS else ""))
    for t in tests:
        f = claim_file(t["nodeid"], files)
        t["claim_file"] = f
        t["claims"] = [c["name"] for c in claims if f is not None and f in c["properties"]]
        if f is not None:
            files[f]["tests"].append(t)
            _count(files[f], t)
    papers: dict[str, dict] = {}
    for c in claims:
        key = _paper_key(c)
        paper = papers.setdefault(key, {"key": key, "name": AREAS[key][1] if key in AREAS else c["paper"],
                                        "title": c["paper"], "claims": []})
        card = {**c, **_tally(), "slug": "claim-" + re.sub(r"[^A-Za-z0-9]+", "-", c["name"]).strip("-"),
                "files": [files[f] for f in c["properties"]], "flagged": []}
        not_judged: dict[str, int] = defaultdict(int)
        for f in card["files"]:
            for t in f["tests"]:
                _count(card, t)
                for why, n in (t["hyp"] or {}).get("not_judged", []):
                    not_judged[why] += n
                if t["failed"] or t.get("outcome") == "xpassed":
                    card["flagged"].append(t)
        card["not_judged"] = sorted(not_judged.items(), key=lambda kv: (-kv[1], kv[0]))
        card["undecided"] = sum(n for why, n in not_judged.items() if UNDECIDED.search(why))
        card["state"] = _state(card)
        paper["claims"].append(card)
    return list(papers.values()), list(files.values())


def build_context(run: dict, run_dir: Path) -> dict:
    """Everything the template needs, computed once here so the template stays declarative."""
    tests = sorted(run["tests"].values(), key=lambda t: (not t["tagged"], _group_key(t["group"]), t["nodeid"]))
    max_cards = int(run.get("max_cards") or 12)
    claims, claims_note = load_claims()
    for t in tests:
        t["hyp"] = _hypothesis_summary(t.get("hypothesis") or [])
        t["failed"] = t.get("outcome") in FAILED
        t["claims"], t["claim_file"] = [], None
    claim_papers, claim_files = _claim_context(claims, tests) if claims is not None else ([], [])
    # Without the registry, the theorem rows are shown even when none of their tests ran; with it, the
    # claim cards show that, and the table holds only the tests in no claim's files.
    groups: dict[str, dict] = {g: _empty_group(g, tagged=True) for g in (ALWAYS_SHOWN if claims is None else ())}
    totals = _tally()
    cards, relaxations, failures, xpasses, pending = [], [], [], [], []
    targets: dict[str, dict] = {}  # best score per hypothesis.target label, over the whole run
    seen_relaxations: dict = {}
    for i, t in enumerate(tests):
        rec = t.get("records") or {}
        t["anchor"] = f"t{i}"
        t["replay"] = replay_command(run, t["nodeid"], t.get("reproduce_blob") if t["failed"] else None)
        inputs = rec.get("inputs") or []
        t["hists"], t["ranges"] = _input_charts(inputs)
        t["n_inputs"] = len(inputs)
        t["metrics"] = [m for m in rec.get("metrics") or []]
        t["figures"] = [_figure_within_budget(f) for f in rec.get("figure") or []]
        _count(totals, t)
        if t["claim_file"] is None:
            g = groups.get(t["group"])
            if g is None:
                g = groups[t["group"]] = _empty_group(t["group"], tagged=t["tagged"])
            g["papers"].append(t["paper"])
            if not t["tagged"]:
                g["modules"].setdefault(_readable(_module_name(t["nodeid"])), None)
            _count(g, t)
        t["judged_floor"] = (t.get("judged") or {}).get("floor")
        t["targets"] = sorted(rec.get("targets") or [], key=lambda e: e["label"])
        for e in t["targets"]:
            best = targets.setdefault(e["label"], {**e, "nodeid": t["nodeid"], "anchor": t["anchor"]})
            if e["score"] > best["score"]:
                best.update(e, nodeid=t["nodeid"], anchor=t["anchor"])
        t["cards"] = []
        pending += [(t, ce) for ce in rec.get("counterexample") or []]
        for r in rec.get("relaxation") or []:
            # A property may record the same row once per example: show it once, with a count.
            key = (t["nodeid"], *(str(r.get(k, "")) for k in ("theorem", "relaxation", "expected", "outcome", "reason")))
            if key in seen_relaxations:
                seen_relaxations[key]["count"] += 1
                continue
            matches = relaxation_matches(r.get("expected"), r.get("outcome"))
            row = {**r, "nodeid": t["nodeid"], "count": 1, "matches": matches,
                   "state": "good" if matches else ("bad" if t["failed"] else "warn")}
            seen_relaxations[key] = row
            relaxations.append(row)
        t["falsifying"] = _falsifying_example(t.get("text") or "")
        t["reason"] = _reason(t.get("text") or "") if t["failed"] else ""
        if t["failed"]:
            failures.append(t)
        elif t.get("outcome") == "xpassed":
            xpasses.append(t)
    # Failing tests' cards first, so they get the drawings when there are more cards than the budget.
    pending.sort(key=lambda tc: not tc[0]["failed"])
    for i, (t, ce) in enumerate(pending):
        card = _card(t, ce, run_dir, full=i < max_cards)
        card["n"] = i + 1
        cards.append(card)
        t["cards"].append(card)
    for g in groups.values():
        papers = sorted(set(g.pop("papers")) - {""})
        g["paper"] = GROUPS.get(g["name"]) or (papers[0] if len(papers) == 1 else "both" if papers else "")
        g["modules"] = sorted(g["modules"])
        if g["modules"] == [g["name"].split(",")[0]]:  # a module outside any folder names its own group
            g["modules"] = []
        g["state"] = _state(g)
    group_rows = sorted(groups.values(), key=lambda g: (not g["tagged"], _group_key(g["name"])))
    n_failed = sum(t["failed"] for t in tests)
    return {
        "run": run, "tests": tests, "groups": group_rows, "totals": totals, "cards": cards,
        # The claims' cards by paper (None: no registry, the table is the whole dashboard), their test files.
        "papers": claim_papers if claims is not None else None, "claim_files": claim_files, "claims_note": claims_note,
        "group_totals": {k: sum(g[k] for g in group_rows) for k in BUCKETS},
        "theorem_groups": [g for g in group_rows if g["tagged"]],
        "untagged_groups": [g for g in group_rows if not g["tagged"]],
        "relaxations": relaxations, "failures": failures, "xpasses": xpasses, "sections": SECTIONS,
        "targets": [targets[k] for k in sorted(targets)],
        "rerun": run.get("rerun") or rerun_command(run), "max_cards": max_cards,
        "n_failed": n_failed, "verdict": verdict(run, n_failed, totals), "run_dir": str(run_dir),
        "observations": _observations(run_dir),
        "sweeps": _sweeps(run, run_dir),
    }


def _module_name(nodeid: str) -> str:
    stem = PurePosixPath(nodeid.split("::")[0]).stem
    return stem[len("test_"):] if stem.startswith("test_") else stem


SWEEP_DIR_ENV = "ATTN_SUITE_SWEEPS"  # folder of sweep files (default: <rootdir>/sweeps, python -m theory sweep's)


def _sweeps(run: dict, run_dir: Path) -> list[dict]:
    """Phase diagrams of the sweep files this run wrote: every ``<run>/sweeps/*.jsonl``, and those of
    ``<rootdir>/sweeps/`` (or ``$ATTN_SUITE_SWEEPS``) modified while the run ran; a file an earlier command
    left there is not this run's work and is not shown.  A file that cannot be drawn is listed with the reason."""
    import base64
    import os

    own = {p.resolve() for p in (run_dir / "sweeps").glob("*.jsonl")} if (run_dir / "sweeps").is_dir() else set()
    shared = Path(os.environ[SWEEP_DIR_ENV]) if os.environ.get(SWEEP_DIR_ENV) else \
        Path(run["rootdir"]) / "sweeps" if run.get("rootdir") else None
    window = _run_window(run)
    if shared is not None and shared.is_dir() and window is not None:
        start, end = window
        own |= {p.resolve() for p in shared.glob("*.jsonl") if start <= p.stat().st_mtime <= end}
    out = []
    for f in sorted(own):
        entry = {"file": str(f), "name": f.stem}
        try:
            try:
                from theory.run.sweep import figure, read_records
            except ModuleNotFoundError:  # the layout before theory/ had sub-packages
                from theory.sweep import figure, read_records

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


def _run_window(run: dict) -> tuple[float, float] | None:
    """When the run ran, as epoch seconds (start, end); None when run.json does not say (a file outside the
    run folder is then never counted as the run's).  Runs before ``started_epoch`` was recorded: their
    ISO ``started`` time, to the second, and ``duration_s``."""
    import datetime as dt

    start = run.get("started_epoch")
    if start is None:
        try:
            start = dt.datetime.fromisoformat(str(run.get("started"))).timestamp()
        except ValueError:
            return None
    end = run.get("finished_epoch")
    if end is None:
        end = start + float(run["duration_s"]) + 1 if run.get("duration_s") is not None else float("inf")
    return float(start), float(end)


def _observations(run_dir: Path) -> dict | None:
    """The run's Hypothesis observation files (Tyche's input, ``.jsonl.gz`` or ``.jsonl``), with how many
    test cases they hold and their size on disk."""
    folder = run_dir / "observations"
    files = _jsonl_files(folder, "*_testcases")
    if not files:
        return None
    cases = 0
    for f in files:
        cases += sum(1 for _ in _read_text(f).splitlines())
    everything = [p for p in folder.iterdir() if p.is_file()]
    return {"files": [f"observations/{f.name}" for f in files], "cases": cases,
            "gzipped": any(f.name.endswith(".gz") for f in files),
            "bytes": sum(p.stat().st_size for p in everything)}


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


def _empty_group(name: str, tagged: bool) -> dict:
    return {"name": name, "slug": "group-" + re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-"), "tagged": tagged,
            "paper": GROUPS.get(name, ""), "papers": [], "modules": {}, **_tally()}


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
    env.filters["size"] = _size
    return env


def _seconds(x) -> str:
    x = float(x or 0.0)
    return f"{x * 1000:.0f} ms" if x < 1 else (f"{x:.1f} s" if x < 120 else f"{x / 60:.1f} min")


def _size(n) -> str:
    n = float(n or 0)
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB" if n >= 1e3 else f"{n:.0f} B"


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
