"""Problem files: validation errors, reported assumptions, JSON round trip, and the CLI end to end.

Malformed input raises ProblemError whose one-line message names the field and the index; unmet
assumptions are reported by ``Problem.assumptions()`` and never raised.  The CLI (``python -m theory``)
prints the documented JSON, and bad input exits with status 2 and exactly one line on stderr.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, given, note
from hypothesis import strategies as st

from reports.record import record_inputs
from strategies import drawn_problems
from theory.core.problem import FILE_KEYS, LOSSES, Problem, ProblemError

pytestmark = pytest.mark.theorem("Reference")

ROOT = Path(__file__).resolve().parents[2]


def record(p: Problem) -> None:
    record_inputs(K=p.K, n=p.n, T=max(len(s) for s in p.sequences))


def valid_doc() -> dict:
    return {"embeddings": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            "sequences": [[0, 1, 2], [1, 0, 2], [2, 1]], "labels": [0, 1, 2], "loss": "log"}


def expect_problem_error(doc: dict, *fragments: str) -> str:
    """``Problem.from_json(doc)`` raises ProblemError, one line, mentioning every fragment."""
    with pytest.raises(ProblemError) as info:
        Problem.from_json(doc)
    msg = str(info.value)
    assert "\n" not in msg, f"message should be one line, got {msg!r}"
    for frag in fragments:
        assert frag in msg, f"message should name {frag!r}; expected it in {msg!r}"
    return msg


# ------------------------------------------------------------------------------------------------
# Validation: every malformed input named in the issue, at a drawn index
# ------------------------------------------------------------------------------------------------
@st.composite
def corrupted_docs(draw):
    """(doc, fragments): a drawn valid problem's file with one malformation at a drawn index, and the
    field-and-index text the message must contain."""
    p = draw(drawn_problems(heads=True), label="problem").problem
    doc = json.loads(json.dumps(p.to_json()))
    K, d, n = p.K, p.d, p.n
    kind = draw(st.sampled_from(["ragged", "non_finite", "non_number", "token_range", "token_type",
                                 "label_range", "empty_sequence", "label_count", "unknown_loss",
                                 "head_shape", "no_head_dependent", "head_non_finite", "unknown_key",
                                 "missing_key", "empty_sequences"]), label="kind")
    event(f"malformation: {kind}")
    r = draw(st.integers(0, K - 1), label="row")
    c = draw(st.integers(0, d - 1), label="col")
    i = draw(st.integers(0, n - 1), label="sample")
    if kind == "ragged":
        r = max(r, 1)  # row 0 fixes the width
        doc["embeddings"][r] = doc["embeddings"][r][:-1] if draw(st.booleans(), label="shorter") else \
            doc["embeddings"][r] + [0.0]
        return doc, [f"embeddings[{r}]", "ragged"]
    if kind == "non_finite":
        doc["embeddings"][r][c] = draw(st.sampled_from([math.nan, math.inf, -math.inf]), label="value")
        return doc, [f"embeddings[{r}][{c}]", "non-finite"]
    if kind == "non_number":
        doc["embeddings"][r][c] = draw(st.sampled_from(["1.0", None, True, [1.0]]), label="value")
        return doc, [f"embeddings[{r}][{c}]"]
    if kind == "head_non_finite":
        doc["head"][r][c] = math.nan
        return doc, [f"head[{r}][{c}]", "non-finite"]
    if kind == "token_range":
        t = draw(st.integers(0, len(doc["sequences"][i]) - 1), label="position")
        doc["sequences"][i][t] = draw(st.sampled_from([K, K + 5, -1]), label="token")
        return doc, [f"sequences[{i}][{t}]", "out of range"]
    if kind == "token_type":
        t = draw(st.integers(0, len(doc["sequences"][i]) - 1), label="position")
        doc["sequences"][i][t] = draw(st.sampled_from([0.5, "0", None, True]), label="token")
        return doc, [f"sequences[{i}][{t}]"]
    if kind == "label_range":
        doc["labels"][i] = draw(st.sampled_from([K, -1, K + 100]), label="label")
        return doc, [f"labels[{i}]", "out of range"]
    if kind == "empty_sequence":
        doc["sequences"][i] = []
        return doc, [f"sequences[{i}]", "empty"]
    if kind == "empty_sequences":
        doc["sequences"], doc["labels"] = [], []
        return doc, ["sequences"]
    if kind == "label_count":
        doc["labels"] = doc["labels"] + [0] if draw(st.booleans(), label="more") or n == 1 else doc["labels"][:-1]
        return doc, ["labels", f"{len(doc['labels'])} labels for {n} sequences"]
    if kind == "unknown_loss":
        doc["loss"] = draw(st.sampled_from(["hinge", "Log", "", "cross_entropy"]), label="loss")
        return doc, ["loss", repr(doc["loss"])]
    if kind == "head_shape":
        doc["head"] = [row[:-1] for row in doc["head"]] if d > 1 and draw(st.booleans(), label="narrow") else \
            doc["head"] + [[0.0] * d]
        return doc, ["head", "does not match"]
    if kind == "no_head_dependent":
        doc.pop("head", None)
        doc["embeddings"][r] = list(doc["embeddings"][(r + 1) % K])  # two equal rows
        return doc, ["head", "dependent"]
    if kind == "unknown_key":
        key = draw(st.text(st.characters(codec="ascii", categories=["L", "N", "P"]), min_size=1, max_size=8)
                   .filter(lambda k: k not in FILE_KEYS), label="key")
        doc[key] = 1
        return doc, [repr(key), "unknown key"]
    key = draw(st.sampled_from(sorted(FILE_KEYS - {"head"})), label="missing")
    del doc[key]
    return doc, [key, "missing"]


@given(case=corrupted_docs())
def test_malformed_input_raises_problem_error_naming_field_and_index(case):
    doc, fragments = case
    note(f"fragments expected in the message: {fragments}")
    expect_problem_error(doc, *fragments)


@pytest.mark.parametrize("name, mutate, fragments", [
    ("ragged embeddings", lambda d: d["embeddings"].__setitem__(2, [0.0, 1.0]), ["embeddings[2]", "ragged"]),
    ("NaN embedding", lambda d: d["embeddings"][1].__setitem__(2, float("nan")), ["embeddings[1][2]", "non-finite"]),
    ("inf head", lambda d: d.__setitem__("head", [[1.0, 0, 0], [0, 1.0, float("inf")], [0, 0, 1.0]]),
     ["head[1][2]", "non-finite"]),
    ("token out of range", lambda d: d["sequences"][1].__setitem__(0, 3), ["sequences[1][0]", "out of range"]),
    ("negative token", lambda d: d["sequences"][2].__setitem__(1, -1), ["sequences[2][1]", "out of range"]),
    ("label out of range", lambda d: d["labels"].__setitem__(2, 7), ["labels[2]", "out of range"]),
    ("empty sequence", lambda d: d["sequences"].__setitem__(1, []), ["sequences[1]", "empty"]),
    ("label count", lambda d: d["labels"].pop(), ["labels", "2 labels for 3 sequences"]),
    ("unknown loss", lambda d: d.__setitem__("loss", "hinge"), ["loss", "'hinge'"]),
    ("head shape", lambda d: d.__setitem__("head", [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]), ["head", "3x2", "3x3"]),
    ("dependent, no head", lambda d: d["embeddings"].__setitem__(2, [1.0, 1.0, 0.0]), ["head", "dependent"]),
    ("more tokens than dimensions, no head", lambda d: d["embeddings"].__setitem__(slice(None), [[1.0, 0], [0, 1.0], [1.0, 1.0]]),
     ["head", "dependent"]),
    ("unknown key", lambda d: d.__setitem__("positions", [0]), ["positions", "unknown key"]),
    ("missing key", lambda d: d.pop("labels"), ["labels", "missing"]),
    ("not an object", None, ["file"]),
])
def test_malformed_input_fixed_cases(name, mutate, fragments):
    doc = valid_doc()
    if mutate is None:
        doc = [doc]
    else:
        mutate(doc)
    expect_problem_error(doc, *fragments)


def test_numpy_inputs_validated_like_lists():
    E = np.eye(3)
    E[0, 1] = np.nan
    with pytest.raises(ProblemError, match=r"embeddings\[0\]\[1\]"):
        Problem.create(E, [[0, 1]], [0])
    with pytest.raises(ProblemError, match=r"embeddings"):
        Problem.create(np.ones(3), [[0, 1]], [0])
    with pytest.raises(ProblemError, match=r"sequences\[0\]\[1\]"):
        Problem.create(np.eye(3), [np.array([0, 3])], [0])


# ------------------------------------------------------------------------------------------------
# Assumptions are reported, not raised
# ------------------------------------------------------------------------------------------------
@given(dp=drawn_problems(), which=st.sampled_from(["none", "head", "label", "dependent", "all"]))
def test_assumptions_reported_not_raised(dp, which):
    p = dp.problem
    record(p)
    assert p.assumptions() == {"head_biorthogonal": True, "labels_in_sequences": True,
                               "embeddings_independent": True}, f"drawn problems satisfy both: {p.assumptions()}"
    E, seqs, labels, head = p.E.copy(), [list(s) for s in p.sequences], list(p.labels), p.C.copy()
    expected = {"head_biorthogonal": True, "labels_in_sequences": True, "embeddings_independent": True}
    if which in ("head", "all"):
        head = 2.0 * head  # C E^T = 2 I
        expected["head_biorthogonal"] = False
    if which in ("label", "all"):
        missing = [t for t in range(p.K) if t not in seqs[0]]
        if missing:
            labels[0] = missing[0]
            expected["labels_in_sequences"] = False
    if which in ("dependent", "all"):
        E[1] = E[0]
        expected["embeddings_independent"] = False
        expected["head_biorthogonal"] = bool(np.abs(head @ E.T - np.eye(p.K)).max() <= 1e-8 * max(1.0, np.abs(head @ E.T).max()))
    event(f"broken: {which}")
    q = Problem.create(E, seqs, labels, "log", head)  # must not raise
    assert q.assumptions() == expected, f"assumptions: expected {expected}, got {q.assumptions()}"


def test_more_tokens_than_dimensions_reported_with_head():
    p = Problem.create([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0, 1, 2]], [0], head=[[1.0, 0], [0, 1.0], [0, 0]])
    assert p.assumptions()["embeddings_independent"] is False
    assert p.assumptions()["head_biorthogonal"] is False


# ------------------------------------------------------------------------------------------------
# JSON round trip
# ------------------------------------------------------------------------------------------------
@given(dp=drawn_problems(loss=st.sampled_from(LOSSES), heads=True), default_head=st.booleans())
def test_json_save_load_round_trip(dp, default_head):
    p = dp.problem
    if default_head:
        p = Problem.create(p.E, p.sequences, p.labels, p.loss)
    record(p)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "problem.json"
        p.save(path)
        doc = json.loads(path.read_text())
        q = Problem.load(path)
    assert set(doc) == FILE_KEYS - ({"head"} if default_head else set()), f"keys written: {sorted(doc)}"
    assert np.array_equal(p.E, q.E), "embeddings changed in the round trip"
    assert np.array_equal(p.C, q.C), "head changed in the round trip"
    assert (q.sequences, q.labels, q.loss, q.head_given) == (p.sequences, p.labels, p.loss, p.head_given)
    assert q.to_json() == p.to_json()


@given(key=st.text(st.characters(exclude_categories=["Cc", "Zl", "Zp"]), min_size=1, max_size=12)
       .filter(lambda k: k not in FILE_KEYS))
def test_unknown_keys_rejected(key):
    doc = valid_doc()
    doc[key] = [1, 2]
    expect_problem_error(doc, repr(key), "unknown key")


def test_unknown_key_with_line_break_gives_one_line_message():
    doc = valid_doc()
    doc["bad\nkey"] = 1
    expect_problem_error(doc, "unknown key")


# ------------------------------------------------------------------------------------------------
# CLI end to end
# ------------------------------------------------------------------------------------------------
def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "theory", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=120)


# SCC {0, 1} above the query 2, E = I: W^svm column 2 = (1/3, 1/3, -2/3) (see test_reference.py);
# labels 0, 1, 1 -> W^fin attention over {0, 1} = (1/3, 2/3), i.e. score difference log 2.
SCC_DOC = {"embeddings": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
           "sequences": [[0, 1, 2], [1, 0, 2], [0, 1, 2]], "labels": [0, 1, 1], "loss": "log"}


@pytest.fixture(scope="module")
def scc_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "scc.json"
    path.write_text(json.dumps(SCC_DOC))
    return path


def test_cli_analyze_prints_documented_json(scc_file):
    res = run_cli("analyze", scc_file)
    assert res.returncode == 0, f"exit {res.returncode}, stderr: {res.stderr}"
    out = json.loads(res.stdout)
    assert set(out) == {"vocab_size", "dim", "samples", "assumptions", "certificate", "graphs", "svm",
                        "cyclic_subspace", "finite", "svm_nuclear"}, sorted(out)
    assert out["certificate"] == "exact"
    assert (out["vocab_size"], out["dim"], out["samples"]) == (3, 3, 3)
    assert out["assumptions"] == {"head_biorthogonal": True, "labels_in_sequences": True,
                                  "embeddings_independent": True, "loss_finite_at_zero": True}
    assert set(out["graphs"]) == {"2"}
    g = out["graphs"]["2"]
    assert set(g) == {"edges", "sccs"}
    assert sorted(map(tuple, g["edges"])) == [(0, 1), (0, 2), (1, 0), (1, 2)]
    assert sorted(map(sorted, g["sccs"])) == [[0, 1], [2]]
    assert set(out["svm"]) == {"W", "norm", "certificate"}
    assert out["svm"]["certificate"]["exact_distance"] <= 1e-10
    W = np.array(out["svm"]["W"])
    expected = np.zeros((3, 3))
    expected[:, 2] = [1 / 3, 1 / 3, -2 / 3]
    assert np.abs(W - expected).max() < 1e-6, f"W^svm: expected {expected.tolist()}, got {W.tolist()}"
    assert abs(out["svm"]["norm"] - np.sqrt(2 / 3)) < 1e-6
    assert out["cyclic_subspace"] == {"dim": 1}
    Wf = np.array(out["finite"]["W"])
    assert set(out["finite"]) == {"W", "grad_norm", "error_bound", "grad_norm_extended", "min_curvature"}
    assert 0 <= out["finite"]["error_bound"] <= 1e-12, out["finite"]
    assert abs((Wf[1, 2] - Wf[0, 2]) - np.log(2)) < 1e-8, f"W^fin score gap: expected log 2, got {Wf[1, 2] - Wf[0, 2]}"
    assert res.stderr == ""


def test_cli_train_prints_documented_json(scc_file, tmp_path):
    init = tmp_path / "init.json"
    init.write_text(json.dumps((0.01 * np.eye(3)).tolist()))
    res = run_cli("train", scc_file, "--steps", 50, "--step-size", 0.5, "--init", init)
    assert res.returncode == 0, f"exit {res.returncode}, stderr: {res.stderr}"
    out = json.loads(res.stdout)
    assert set(out) == {"W", "loss", "norm", "correlation", "finite_error", "steps", "seconds"}, sorted(out)
    W = np.array(out["W"])
    assert W.shape == (3, 3)
    assert out["steps"] == 50
    assert abs(out["norm"] - np.linalg.norm(W)) < 1e-9
    assert -1 <= out["correlation"] <= 1 and out["correlation"] > 0.5, out["correlation"]
    assert out["finite_error"] >= 0 and out["seconds"] >= 0
    # Same run in process: the CLI is a thin wrapper.
    from theory.li2024.losses import loss
    p = Problem.from_json(SCC_DOC)
    assert abs(out["loss"] - loss(W, p)) < 1e-12, f"loss: expected {loss(W, p)}, got {out['loss']}"
    assert out["loss"] < loss(0.01 * np.eye(3), p), "50 GD steps should lower the loss"
    # Every sample has query 2, so GD only moves column 2 of W: the rest of W(0) is untouched.
    assert np.array_equal(W[:, :2], 0.01 * np.eye(3)[:, :2]), W


BAD_CASES = {
    "malformed JSON": ("analyze", '{"embeddings": [[1, 0], [0, 1]], "sequences": [[0, 1]', None, []),
    "ragged": ("analyze", json.dumps({**SCC_DOC, "embeddings": [[1.0, 0, 0], [0, 1.0], [0, 0, 1.0]]}), None,
               ["embeddings[1]"]),
    "token out of range": ("analyze", json.dumps({**SCC_DOC, "sequences": [[0, 1, 2], [1, 9, 2], [0, 1, 2]]}),
                           None, ["sequences[1][1]"]),
    "missing file": ("analyze", None, None, ["cannot read"]),
    "bad --init shape": ("train", json.dumps(SCC_DOC), "[[1.0, 0.0], [0.0, 1.0]]", ["init", "3x3"]),
    "negative --steps": ("train", json.dumps(SCC_DOC), None, ["--steps"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_cli_bad_input_exits_2_with_one_line(case, tmp_path):
    command, text, init, fragments = BAD_CASES[case]
    path = tmp_path / "problem.json"
    if text is not None:
        path.write_text(text)
    args = [command, path if text is not None else tmp_path / "does-not-exist.json"]
    if command == "train":
        args += ["--steps", -3 if case == "negative --steps" else 5, "--step-size", 0.1]
    if init is not None:
        (tmp_path / "init.json").write_text(init)
        args += ["--init", tmp_path / "init.json"]
    res = run_cli(*args)
    assert res.returncode == 2, f"{case}: expected exit 2, got {res.returncode}; stderr: {res.stderr!r}"
    lines = res.stderr.splitlines()
    assert len(lines) == 1, f"{case}: expected exactly one stderr line, got {len(lines)}:\n{res.stderr}"
    assert "Traceback" not in res.stderr
    assert res.stdout == "", f"{case}: nothing on stdout expected, got {res.stdout!r}"
    for frag in fragments:
        assert frag in lines[0], f"{case}: stderr should mention {frag!r}: {lines[0]!r}"


def test_cli_binary_file_is_one_line_naming_the_file(tmp_path):
    """A 10 MB non-UTF-8 file is bad input like any other: exit 2, one line starting ``error: file PATH:``
    (it printed Python's bare ``'utf-8' codec can't decode byte ...``), no traceback, nothing on stdout."""
    path = tmp_path / "garbage.json"
    path.write_bytes(b"{\"embeddings\": " + bytes(range(128, 256)) * (10 * 2**20 // 128))
    res = run_cli("analyze", path)
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr and res.stdout == "", res.stderr[-2000:]
    assert lines[0].startswith(f"error: file {path}: not UTF-8 text (byte 0x80 at offset 15)"), lines[0]
