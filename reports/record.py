"""What a property attaches to the run's report.

Properties call these functions from inside a test (also inside a Hypothesis test body); the pytest
plugin (``reports.plugin``) sets the current test before each test runs and collects everything at the
end of the session.  Outside a pytest run (e.g. ``python -m theory``) the calls are harmless no-ops
apart from :func:`report_dir`, which then returns a temporary folder.

Kinds of record, each a list per test id:

``inputs``          one dict per generated example: K, n, T, n_sccs, dim_sfin, svm_norm (any subset),
                    charted per property so a reader sees what was covered.
``counterexample``  a card: see :func:`record_counterexample`.
``relaxation``      rows of the relaxation table: theorem, relaxation, expected, outcome, reason.
``figure``          a named PNG (bytes) or SVG (str) drawn by a reproduction.
``metrics``         free-form key -> number pairs shown under the property (e.g. a reproduction's means).
``targets``         per ``hypothesis.target`` label, the best score reached and the example that reached it
                    (one entry per label, kept by :func:`record_target`).
"""
from __future__ import annotations

import base64
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPORT_DIR_ENV = "TPG_REPORT_DIR"

_current: dict = {"test": None}
_store: dict = defaultdict(lambda: defaultdict(list))
# The latest card recorded while Hypothesis was still exploring (generating or shrinking), per test.
_pending_card: dict = {}


def set_current_test(nodeid: str | None) -> None:
    _current["test"] = nodeid


def _append(kind: str, value) -> None:
    test = _current["test"]
    if test is not None:
        _store[test][kind].append(value)


def _hypothesis_exploring() -> bool:
    """True inside a Hypothesis test body that is not the final replay of a failing example."""
    try:
        from hypothesis.control import _current_build_context
    except ImportError:  # pragma: no cover
        return False
    ctx = _current_build_context.value
    return ctx is not None and not getattr(ctx, "is_final", False)


def _hypothesis_phase() -> str | None:
    """The Hypothesis phase (``generate``, ``shrink``, ...) running the current test body, if any.

    Hypothesis does not expose it to the body, so look for its engine on the call stack; only done inside
    a Hypothesis test, and ``None`` (record everything) when the engine cannot be found.
    """
    try:
        from hypothesis.control import _current_build_context
    except ImportError:  # pragma: no cover
        return None
    if _current_build_context.value is None:
        return None
    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if owner is not None and type(owner).__name__ == "ConjectureRunner":
            return getattr(owner, "_current_phase", None)
        frame = frame.f_back
    return None


def take_records() -> dict:
    """Everything recorded so far in this process, as plain dicts; clears the store.

    Counterexample cards recorded while Hypothesis explores (every failing example met while shrinking
    would make one) are reduced to the last one; the card of Hypothesis's final replay, when there is
    one, replaces it.
    """
    for test, card in _pending_card.items():
        if not _store[test]["counterexample"]:
            _store[test]["counterexample"].append(card)
    _pending_card.clear()
    out = {test: {k: v for k, v in kinds.items() if v} for test, kinds in _store.items()}
    _store.clear()
    return out


def report_dir() -> Path:
    """The run's report folder (``reports/<run-id>``), where counterexample problem files are written."""
    path = os.environ.get(REPORT_DIR_ENV)
    if path is None:
        path = os.path.join(tempfile.gettempdir(), "tpg-report")
        os.environ[REPORT_DIR_ENV] = path
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)


def record_inputs(**stats) -> None:
    """One generated example's statistics.  Examples met while shrinking are not recorded: they say
    nothing about coverage and would swamp the charts of a failing property."""
    if _hypothesis_phase() == "shrink":
        return
    _append("inputs", {k: (float(v) if v is not None else None) for k, v in stats.items()})


def record_counterexample(*, title: str, problem: dict, what_fails: str, amount: float,
                          problem_file: str, replay: str, E=None, graphs: dict | None = None,
                          svm_tokens=None, fin_tokens=None, curves: dict | None = None) -> None:
    """A counterexample card.

    ``problem`` is the problem-file JSON dict, ``graphs`` the ``analyze`` output's graphs
    ({k: {"edges", "sccs"}}), ``svm_tokens``/``fin_tokens`` the K x K matrices ``E W E^T``,
    ``curves`` {"tau": [...], "correlation": [...], "finite_error": [...]} for log-axis plots,
    ``replay`` the one shell command that replays it.
    """
    card = dict(title=title, problem=_plain(problem), what_fails=what_fails, amount=float(amount),
                problem_file=str(problem_file), replay=replay, graphs=_plain(graphs),
                svm_tokens=_plain(svm_tokens), fin_tokens=_plain(fin_tokens), curves=_plain(curves))
    if _hypothesis_exploring():
        if _current["test"] is not None:
            _pending_card[_current["test"]] = card
    else:
        _append("counterexample", card)


def record_target(label: str, score: float, example: str | None = None) -> None:
    """Keep the best (largest) score per label with its example; examples met while shrinking count too
    (they are real examples, and a shrunk near-violation is easier to read)."""
    test = _current["test"]
    if test is None:
        return
    best = _store[test]["targets"]
    for entry in best:
        if entry["label"] == label:
            if score > entry["score"]:
                entry.update(score=float(score), example=example)
            return
    best.append({"label": label, "score": float(score), "example": example})


def record_relaxation(*, theorem: str, relaxation: str, expected: str, outcome: str, reason: str) -> None:
    _append("relaxation", dict(theorem=theorem, relaxation=relaxation, expected=expected, outcome=outcome,
                               reason=reason))


def record_figure(name: str, data) -> None:
    """``data``: PNG bytes or an SVG string.  PNG is kept base64-encoded so the record is plain JSON."""
    if isinstance(data, (bytes, bytearray)):
        _append("figure", {"name": name, "png": base64.b64encode(bytes(data)).decode("ascii")})
    else:
        _append("figure", {"name": name, "svg": str(data)})


def record_metrics(**values) -> None:
    _append("metrics", _plain(values))


def _plain(x):
    if x is None:
        return None
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x
