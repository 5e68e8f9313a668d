"""Checks of a rendered report page and a synthetic run folder, shared by the report's tests and the
sweep's (``properties/suite/test_report.py``, ``test_sweep.py``).  Not a test module."""
from __future__ import annotations

import base64
import json
from html.parser import HTMLParser
from pathlib import Path

from reports import generate

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class Page(HTMLParser):
    """What the checks need from a report: ids, images, inline SVGs, text, external references."""

    def __init__(self, text: str):
        super().__init__()
        self.ids: set[str] = set()
        self.images: list[str] = []
        self.svgs = 0
        self.svg_rects = 0
        self.external: list[str] = []
        self.text_parts: list[str] = []
        self.open_tags: list[str] = []
        self.feed(text)
        self.close()
        self.text = " ".join(" ".join(self.text_parts).split())

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "img":
            self.images.append(a.get("src", ""))
        if tag == "svg":
            self.svgs += 1
        if tag == "rect":
            self.svg_rects += 1
        for key in ("src", "href"):
            v = a.get(key) or ""
            if v.startswith(("http:", "https:", "//")) or (tag in ("script", "link") and v):
                self.external.append(v)
        if tag in ("script", "link"):
            self.external.append(tag)

    def handle_data(self, data):
        self.text_parts.append(data)


def check_page(path: Path) -> Page:
    """The checks every report must pass: parses, all sections, non-empty images, nothing fetched."""
    text = path.read_text(encoding="utf-8")
    page = Page(text)
    missing = [s for s in generate.SECTIONS if s not in page.ids]
    assert not missing, f"sections missing from {path}: {missing}"
    for src in page.images:
        assert src.startswith("data:image/png;base64,"), f"image not inlined: {src[:60]}"
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert data.startswith(PNG_MAGIC) and len(data) > 500, "empty or broken PNG"
    assert not page.external, f"the report fetches something when opened: {page.external}"
    return page


def _graphs():
    # G^(2): 0 <-> 1 form a cycle that has priority over 3 and over the query 2.
    return {"2": {"edges": [[0, 1], [1, 0], [0, 2], [1, 3], [0, 3]], "sccs": [[0, 1], [2], [3]]},
            "4": {"edges": [[3, 4], [3, 0]], "sccs": [[3], [4], [0]]}}


def _card(title):
    return {"title": title, "problem": {"embeddings": [[1, 0], [0, 1]], "sequences": [[0, 1, 3, 2], [3, 0, 4]],
                                        "labels": [0, 3], "loss": "log"},
            "what_fails": "correlation below 0.9", "amount": 0.42, "problem_file": "/nonexistent/p.json",
            "replay": "python -m theory check p.json", "graphs": _graphs(),
            "svm_tokens": [[0, 1.5, -1], [0.2, 0, 0], [-1, 0, 0.5]], "fin_tokens": [[0.1, 0, 0], [0, -0.3, 0], [0, 0, 0.2]],
            "curves": {"tau": [1, 10, 100, 1000], "correlation": [0.2, 0.6, 0.9, 0.97],
                       "finite_error": [3.0, 1.0, 0.3, 0.1]}}


def hypothesis_statistics(examples, events=None, shrinks=0):
    return {"examples": examples, "invalid": 2, "failing": int(shrinks > 0), "shrink_steps": shrinks,
            "shrinks_successful": shrinks // 2, "stopped_because": "settings.max_examples=12",
            "events": events or {}, "event_cases": examples, "median_runtime": 0.001,
            "phases": {"generate": {"cases": examples + 2, "valid": examples, "interesting": 0, "invalid": 2,
                                    "seconds": 0.05}}}


def write_synthetic_run(run_dir: Path, n_cards: int = 2) -> None:
    """A run folder as the plugin would leave it: run.json and two workers' JSON lines."""
    (run_dir / "data").mkdir(parents=True)
    run = {"run_id": run_dir.name, "started": "2024-05-01T10:00:00+00:00", "finished": "2024-05-01T10:00:09+00:00",
           "profile": "stress", "derandomize": False, "seed": 1234, "seed_chosen_by_report": True,
           "args": ["-n", "2"], "rootdir": "/repo", "workers": 2, "duration_s": 9.0, "exitstatus": 1,
           "versions": {"python": "3.11", "hypothesis": "6"}, "max_cards": 1,
           "outcomes": {"properties/test_b.py::test_crashed": {"outcome": "failed", "duration": 1.0,
                                                               "text": "worker 'gw1' crashed"}}}
    (run_dir / "run.json").write_text(json.dumps(run))
    inputs = [{"K": k, "n": 3, "T": 3, "n_sccs": k % 3 + 1, "dim_sfin": 1, "svm_norm": 1.0 + k / 7} for k in range(2, 9)]
    gw0 = [
        {"nodeid": "properties/test_a.py::test_t1", "worker": "gw0", "theorem": "Theorem 1", "outcome": "passed",
         "duration": 2.5, "text": "", "hypothesis": [hypothesis_statistics(12, {"cyclic": 7, "acyclic": 5})],
         "records": {"inputs": inputs, "metrics": [{"mean correlation": 0.98}]}},
        {"nodeid": "properties/test_a.py::test_t2", "worker": "gw0", "theorem": "Theorem 2", "outcome": "failed",
         "duration": 1.5, "text": "AssertionError: corr 0.42 < 0.9", "reproduce_blob": "@reproduce_failure('6', b'AA')",
         "hypothesis": [hypothesis_statistics(5, shrinks=8)],
         "records": {"counterexample": [_card(f"card {i}") for i in range(n_cards)]}},
    ]
    gw1 = [
        {"nodeid": "properties/test_b.py::test_relax", "worker": "gw1", "theorem": "Relaxations", "outcome": "passed",
         "duration": 0.2, "text": "", "hypothesis": [],
         "records": {"relaxation": [{"theorem": "Theorem 1", "relaxation": "label not in context",
                                     "expected": "may fail", "outcome": "fails", "reason": "W^svm infeasible"}] * 3}},
        {"nodeid": "properties/test_b.py::test_plain", "worker": "gw1", "theorem": "test_b", "outcome": "skipped",
         "duration": 0.0, "text": "skipped: synthetic", "hypothesis": [], "records": {}},
    ]
    for name, lines in (("gw0", gw0), ("gw1", gw1)):
        (run_dir / "data" / f"{name}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
