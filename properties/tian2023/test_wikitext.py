"""The WikiText raw-format loader and the shipped corpus (Tian et al. 2023, Sec. 8 / Appendix G data).

Bad input must stop with one line (a :class:`CorpusError`), and the shipped text must load, split by
its stated rule, through the same code path as a user's ``--data DIR``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from theory.tian2023 import wikitext as wt

GOOD = {"wiki.train.raw": " = Title = \n the cat sat on the mat .\n the dog sat .\n",
        "wiki.valid.raw": " the cat ran .\n",
        "wiki.test.raw": " a bird sat on the dog .\n"}


def _write(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def _one_line(exc):
    msg = str(exc)
    assert msg and "\n" not in msg, repr(msg)
    return msg


def test_good_directory_loads_with_unk_for_unseen_words(tmp_path):
    c = wt.load_corpus(_write(tmp_path, GOOD))
    assert c.vocab[0] == wt.UNK
    # "ran", "a" and "bird" never occur in training: they must be <unk> (id 0) in the held-out splits
    assert "ran" not in c.vocab and "bird" not in c.vocab
    assert c.valid.tolist() == [c.vocab.index("the"), c.vocab.index("cat"), 0, c.vocab.index(".")]
    assert (c.test == 0).sum() == 2


@pytest.mark.parametrize("missing", sorted(GOOD))
def test_missing_split_is_one_line_error(tmp_path, missing):
    files = {k: v for k, v in GOOD.items() if k != missing}
    with pytest.raises(wt.CorpusError) as ei:
        wt.read_raw_dir(_write(tmp_path, files))
    assert missing in _one_line(ei.value)


@pytest.mark.parametrize("empty", sorted(GOOD))
def test_empty_split_is_one_line_error(tmp_path, empty):
    files = dict(GOOD, **{empty: "\n  \n"})
    with pytest.raises(wt.CorpusError) as ei:
        wt.read_raw_dir(_write(tmp_path, files))
    assert "empty" in _one_line(ei.value)


def test_directory_without_the_files_and_missing_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    for target in (tmp_path, tmp_path / "nope"):
        with pytest.raises(wt.CorpusError) as ei:
            wt.read_raw_dir(target)
        _one_line(ei.value)


def test_corpus_error_is_a_value_error_and_flattens_newlines():
    e = wt.CorpusError("two\nlines")
    assert isinstance(e, ValueError) and str(e) == "two lines"


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["The", "cat", "SAT", ",", "dog's", "@-@", "<unk>", "."]), min_size=1, max_size=30))
def test_tokenize_lowercases_and_keeps_the_tokens(words):
    assert wt.tokenize(" ".join(words)) == [w.lower() for w in words]


def test_vocabulary_cap_maps_the_rarest_words_to_unk(tmp_path):
    c_all = wt.load_corpus(_write(tmp_path, GOOD))
    c_cap = wt.load_corpus(tmp_path, max_vocab=3)
    assert c_cap.vocab_size == 3 and c_cap.vocab[1:] == c_all.vocab[1:3]
    assert np.all((c_cap.train == 0) | (c_cap.train < 3))


def test_shipped_corpus_round_trips_through_the_raw_directory_reader(tmp_path):
    splits = wt.shipped_splits()
    # the split rule: one chapter in 20 to each held-out split, so each holds 3-7% of the verses
    n = len(splits.train) + len(splits.valid) + len(splits.test)
    assert 0.03 < len(splits.valid) / n < 0.07 and 0.03 < len(splits.test) / n < 0.07
    a = wt.build_corpus(splits, max_vocab=500)
    b = wt.load_corpus(wt.write_raw_dir(splits, tmp_path / "kjv"), max_vocab=500)
    assert a.vocab == b.vocab
    for name in ("train", "valid", "test"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert a.train.size > 500_000  # a real book, not a toy


def test_batchify_keeps_streams_contiguous():
    ids = np.arange(23)
    s = wt.batchify(ids, 4)
    assert s.shape == (4, 5) and s[1].tolist() == [5, 6, 7, 8, 9]
    with pytest.raises(wt.CorpusError):
        wt.batchify(np.arange(5), 4)


def _cases(tmp_path):
    dirs = {name: tmp_path / name for name in ("missing", "empty", "none")}
    for d in dirs.values():
        d.mkdir()
    _write(dirs["missing"], {k: v for k, v in GOOD.items() if k != "wiki.valid.raw"})
    _write(dirs["empty"], dict(GOOD, **{"wiki.test.raw": ""}))
    return {"missing split": dirs["missing"], "empty split": dirs["empty"], "no files": dirs["none"]}


@pytest.mark.parametrize("experiment", ["tian-fig7", "tian-fig10"])
def test_command_turns_bad_corpus_input_into_exit_2_and_one_line(tmp_path, capsys, experiment):
    from theory.run.cli import main

    for what, d in _cases(tmp_path).items():
        rc = main(["reproduce", experiment, "--data", str(d), "--steps", "1"])
        err = capsys.readouterr().err.strip()
        assert rc == 2, what
        assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, (what, err)


def test_command_exit_2_end_to_end(tmp_path):
    """The same through a real process: status 2, one line on stderr, nothing on stdout."""
    import subprocess
    import sys

    d = _cases(tmp_path)["missing split"]
    r = subprocess.run([sys.executable, "-m", "theory", "reproduce", "tian-fig7", "--data", str(d)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "wiki.valid.raw" in r.stderr
