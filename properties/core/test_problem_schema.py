"""The problem file's JSON Schema (theory/core/problem.schema.json) and the loader agree.

The loader (:meth:`theory.core.problem.Problem.from_json`) is what the command line runs: one-line messages
naming the field and index, and the checks a schema cannot state (equal row lengths, token ids below K,
one label per sequence, a default head that exists).  The schema is the published contract (rendered in the
docs).  So: every file the loader accepts satisfies the schema, every structural malformation is rejected by
both, and the schema's keys and losses are the loader's.
"""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from strategies import drawn_problems
from theory.core.problem import (FILE_KEYS, LOSSES, REQUIRED_KEYS, Problem, ProblemError, schema,
                                 shipped_example, shipped_examples)

pytestmark = pytest.mark.theorem("Reference")

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = jsonschema.Draft202012Validator(schema())


def schema_ok(doc) -> bool:
    return VALIDATOR.is_valid(doc)


def loader_ok(doc) -> bool:
    try:
        Problem.from_json(doc)
    except ProblemError:
        return False
    return True


def test_schema_is_valid_and_names_the_loaders_keys_and_losses():
    jsonschema.Draft202012Validator.check_schema(schema())
    s = schema()
    assert set(s["properties"]) == FILE_KEYS and set(s["required"]) == REQUIRED_KEYS
    assert s["additionalProperties"] is False
    assert tuple(s["properties"]["loss"]["enum"]) == LOSSES


def test_every_shipped_example_satisfies_the_schema():
    names = shipped_examples()
    assert names == sorted(p.name for p in (ROOT / "examples").glob("*.json")), "theory/examples is not examples/"
    for name in names:
        doc = json.loads(shipped_example(name).read_text())
        assert schema_ok(doc), f"{name}: {next(VALIDATOR.iter_errors(doc)).message}"
        Problem.from_json(doc)


@given(p=drawn_problems(heads=True))
def test_drawn_problem_files_satisfy_the_schema(p):
    doc = json.loads(json.dumps(p.problem.to_json()))
    assert schema_ok(doc), next(VALIDATOR.iter_errors(doc)).message


# Each field's value: valid ones and every kind of wrong one (types, empty lists, out-of-range ids).
_number = st.one_of(st.floats(-3, 3), st.integers(-3, 3))
_anything = st.one_of(st.none(), st.booleans(), st.text(max_size=2), st.just(0.5), st.just([]), st.just({}),
                      st.just([[]]), st.just(-1))
_row = st.lists(st.one_of(_number, _anything), min_size=0, max_size=3)
_matrix = st.one_of(st.lists(st.lists(_number, min_size=3, max_size=3), min_size=1, max_size=3),
                    st.lists(_row, max_size=3), _anything)
_token = st.one_of(st.integers(-1, 3), _anything)
_sequences = st.one_of(st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=3), min_size=1, max_size=3),
                       st.lists(st.lists(_token, max_size=3), max_size=3), _anything)
_labels = st.one_of(st.lists(st.integers(0, 2), min_size=1, max_size=3), st.lists(_token, max_size=3), _anything)
_loss = st.one_of(st.sampled_from(LOSSES), st.sampled_from(["hinge", "Log", ""]), _anything)


@st.composite
def near_valid_docs(draw):
    """A valid 3-token file with each field, independently with probability 1/5, replaced by any value."""
    n = draw(st.integers(1, 3))
    doc = {"embeddings": draw(st.lists(st.lists(st.floats(-3, 3), min_size=3, max_size=3), min_size=3, max_size=3)),
           "sequences": draw(st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=3), min_size=n, max_size=n)),
           "labels": draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), "loss": draw(st.sampled_from(LOSSES))}
    doc["head"] = [list(r) for r in doc["embeddings"]]
    for key, anything in (("embeddings", _matrix), ("head", _matrix), ("sequences", _sequences),
                          ("labels", _labels), ("loss", _loss)):
        if draw(st.integers(0, 4)) == 4:   # (the simplest draw, 0, keeps the field valid)
            doc[key] = draw(anything)
    if draw(st.integers(0, 4)) == 4:
        doc.pop(draw(st.sampled_from(sorted(FILE_KEYS))))
    if draw(st.integers(0, 9)) == 9:
        doc[draw(st.sampled_from(["Loss", "weights", "x"]))] = 1
    return doc


@given(doc=near_valid_docs())
def test_loader_accepts_only_what_the_schema_accepts(doc):
    s, v = schema_ok(doc), loader_ok(doc)
    event(f"schema {'accepts' if s else 'rejects'}, loader {'accepts' if v else 'rejects'}")
    assert s or not v, f"the loader accepts a file the schema rejects: {next(VALIDATOR.iter_errors(doc)).message}"


def valid_doc() -> dict:
    return {"embeddings": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            "sequences": [[0, 1, 2], [1, 0, 2], [2, 1]], "labels": [0, 1, 2], "loss": "log"}


STRUCTURAL = [  # malformations a schema can state: both must reject them
    ("non-number embedding", lambda d: d["embeddings"][1].__setitem__(2, "1.0")),
    ("boolean embedding", lambda d: d["embeddings"][0].__setitem__(0, True)),
    ("fractional token", lambda d: d["sequences"][0].__setitem__(1, 0.5)),
    ("negative token", lambda d: d["sequences"][2].__setitem__(1, -1)),
    ("string label", lambda d: d["labels"].__setitem__(0, "0")),
    ("empty sequence", lambda d: d["sequences"].__setitem__(1, [])),
    ("no sequences", lambda d: (d.__setitem__("sequences", []), d.__setitem__("labels", []))),
    ("empty embeddings", lambda d: d.__setitem__("embeddings", [])),
    ("unknown loss", lambda d: d.__setitem__("loss", "hinge")),
    ("unknown key", lambda d: d.__setitem__("weights", [1, 1, 1])),
    ("missing labels", lambda d: d.pop("labels")),
    ("head not a matrix", lambda d: d.__setitem__("head", [1.0, 0.0, 0.0])),
]
SEMANTIC = [  # what only the loader checks (the schema's description says so)
    ("ragged embeddings", lambda d: d["embeddings"].__setitem__(2, [0.0, 1.0])),
    ("token out of range", lambda d: d["sequences"][1].__setitem__(0, 3)),
    ("label count", lambda d: d["labels"].pop()),
    ("dependent embeddings without a head", lambda d: d["embeddings"].__setitem__(2, [1.0, 0.0, 0.0])),
]


@pytest.mark.parametrize("name, mutate", STRUCTURAL, ids=[n for n, _ in STRUCTURAL])
def test_structural_malformations_are_rejected_by_both(name, mutate):
    doc = valid_doc()
    assert schema_ok(doc) and loader_ok(doc)
    mutate(doc)
    assert not schema_ok(doc), f"{name}: the schema accepts it"
    assert not loader_ok(doc), f"{name}: the loader accepts it"


@pytest.mark.parametrize("name, mutate", SEMANTIC, ids=[n for n, _ in SEMANTIC])
def test_semantic_malformations_are_the_loaders(name, mutate):
    doc = valid_doc()
    mutate(doc)
    assert schema_ok(doc) and not loader_ok(doc), name


def test_shipped_example_is_found_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shipped_example("examples/scc_above_token.json") is not None
    assert shipped_example("scc_above_token.json") is not None
    assert Problem.load("examples/scc_above_token.json").K == 4
    assert shipped_example("examples/no_such_problem.json") is None
    assert shipped_example("elsewhere/scc_above_token.json") is None  # only examples/NAME.json or NAME.json
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "scc_above_token.json").write_text("{}")
    assert shipped_example("examples/scc_above_token.json") is None  # a file that exists is never redirected
    with pytest.raises(ProblemError, match="missing key"):
        Problem.load("examples/scc_above_token.json")


def test_agreement_check_catches_a_schema_stricter_than_the_loader():
    """Calibration: a schema that forgets a loss the loader accepts is caught by the same search."""
    from hypothesis import find, settings

    planted = schema()
    planted["properties"]["loss"]["enum"] = [x for x in LOSSES if x != "exp"]
    strict = jsonschema.Draft202012Validator(planted)
    doc = find(near_valid_docs(), lambda d: loader_ok(d) and not strict.is_valid(d),
               settings=settings(max_examples=500, database=None, derandomize=True))
    assert doc["loss"] == "exp"
