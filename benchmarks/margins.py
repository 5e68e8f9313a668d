"""The measured margins of the three-valued verdicts: worst valid value against mildest planted violation.

    .venv/bin/python benchmarks/margins.py [RUN_DIR ...]     (default: reports/latest)
    .venv/bin/python benchmarks/margins.py --properties [RUN_DIR ...]

The properties record, for each statistic a decision's reject zone tests, the value it took on valid runs
and on planted violations (``properties.judging.margin``: keys ``margin/<statistic>/<valid|planted>`` in
the report's per-test metrics).  Run it on the report folders of stress runs (the search with targeting on
steers the valid side toward its edge) and it prints one Markdown row per statistic: how many values of
each side, the worst valid one (the largest), the mildest planted one (the smallest), the decision's accept
and reject thresholds, and whether the two sides overlap.  Several run folders are pooled.

``--properties`` prints instead the false-alarm table of a run: per property, its outcome, the examples
it judged of those generated, how many verdicts ended *undecided* (the not-judged reasons that say so),
and its other not-judged reasons.
"""
from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def thresholds() -> dict[str, tuple[str, str]]:
    """``statistic -> (accept, reject)`` as the criteria state them (imported, not copied)."""
    from theory.li2024 import criteria, regpath_verdict

    return {
        "theorem1 direction trend γ": (f"<= {criteria.TREND_HOLD}", f">= {criteria.TREND_FAIL}"),
        "section5 level trend tan θ": (f"<= {criteria.DIRECTION_LEVEL_TAN} with |γ| <= {criteria.TREND_HOLD}",
                                        "(escalates; a fixed angle's γ = 1 is rejected)"),
        "theorem1 finite error decade ratio": (f"<= {criteria.FINITE_DECAY}", f">= {criteria.FINITE_STALL}"),
        "theorem1 growth |ln ratio|": ("ratio in [0.6, 1.25]", "ratio outside [0.5, 2], not converging"),
        "theorem2 e⊥ last-doubling ratio (escalated)": ("on track, e⊥ <= 0.2", f">= {regpath_verdict.PLATEAU}"),
    }


def _records(run_dirs):
    """Every per-test record of the runs' report data (gzipped or not)."""
    for run in run_dirs:
        for f in sorted(Path(run, "data").glob("*.jsonl*")):
            opener = gzip.open if f.suffix == ".gz" else open
            with opener(f, "rt") as fh:
                for line in fh:
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line cut short by a killed worker


def collect(run_dirs) -> dict[str, dict[str, list[float]]]:
    values: dict = defaultdict(lambda: defaultdict(list))
    for rec in _records(run_dirs):
        for entry in rec.get("records", {}).get("metrics", []):
            for key, v in entry.items():
                if key.startswith("margin/") and isinstance(v, (int, float)):
                    _, stat, side = key.split("/")
                    values[stat][side].append(float(v))
    return values


def table(values) -> str:
    th = thresholds()
    rows = ["| statistic | valid n | worst valid | planted n | mildest planted | accept | reject | sides apart |",
            "|---|---|---|---|---|---|---|---|"]
    for stat in sorted(values):
        v, p = values[stat].get("valid", []), values[stat].get("planted", [])
        worst = max(v) if v else float("nan")
        mild = min(p) if p else float("nan")
        apart = "yes" if v and p and worst < mild else "no" if v and p else "-"
        acc, rej = th.get(stat, ("?", "?"))
        rows.append(f"| {stat} | {len(v)} | {worst:.4g} | {len(p)} | {mild:.4g} | {acc} | {rej} | {apart} |")
    return "\n".join(rows)


def _inner_judged(rec) -> dict | None:
    """The judged counts of a test whose properties are inner ``@given`` functions (Section 5's, which apply
    their own floor): the sums over the Hypothesis runs the report recorded for it, or None."""
    runs = [h for h in rec.get("hypothesis") or () if isinstance(h, dict) and "judged" in h]
    if not runs:
        return None
    reasons: dict = {}
    for h in runs:
        for why, n in (h.get("not_judged") or {}).items():
            reasons[why] = reasons.get(why, 0) + n
    judged = sum(h["judged"] for h in runs)
    return {"judged": judged, "generated": judged + sum(reasons.values()), "not_judged": reasons}


def properties_table(run_dirs) -> str:
    """One row per property of the runs: outcome, judged / generated, undecided, other not-judged reasons."""
    from reports.generate import UNDECIDED  # the report's own test of an undecided reason

    rows = ["| property | outcome | judged / generated | undecided | not judged otherwise |", "|---|---|---|---|---|"]
    totals = [0, 0, 0]
    for rec in sorted(_records(run_dirs), key=lambda r: r.get("nodeid", "")):
        j = rec.get("judged") or _inner_judged(rec)
        if not j:
            continue
        reasons = j.get("not_judged") or {}
        undecided = sum(n for why, n in reasons.items() if UNDECIDED.search(why))
        other = "; ".join(f"{why}: {n}" for why, n in reasons.items() if not UNDECIDED.search(why)) or "-"
        rows.append(f"| {rec['nodeid'].split('::', 1)[-1]} | {rec.get('outcome')} | {j['judged']} / {j['generated']} | "
                    f"{undecided} | {other} |")
        totals[0] += j["judged"]
        totals[1] += j["generated"]
        totals[2] += undecided
    rows.append(f"| all | | {totals[0]} / {totals[1]} | {totals[2]} | |")
    return "\n".join(rows)


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    by_property = "--properties" in args
    args = [a for a in args if a != "--properties"]
    runs = [Path(a) for a in args] or [REPO / "reports" / "latest"]
    missing = [r for r in runs if not (r / "data").is_dir()]
    if missing:
        print(f"error: no report data in {missing[0]} (expected a reports/<run-id> folder)", file=sys.stderr)
        return 2
    if by_property:
        print(properties_table(runs))
        return 0
    values = collect(runs)
    if not values:
        print("error: no margin records in these runs (run the theorem properties first)", file=sys.stderr)
        return 2
    print(table(values))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
