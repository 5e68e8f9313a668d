"""Next-token prediction problems (docs/theory.md, "Model and loss").

A problem is embeddings ``E`` (K x d), a linear head ``C`` (K x d), token sequences whose last token
is the query, labels and a loss name.  Malformed input raises :class:`ProblemError` whose message
names the field and the index; unmet *assumptions* are reported by :meth:`Problem.assumptions`,
never raised, because the suite deliberately relaxes them.

The file format is published as a JSON Schema, ``theory/core/problem.schema.json`` (package data,
:func:`schema`).  The loader here is the validator the command line uses: it gives a one-line message
naming the field and index, and it also checks what a schema cannot state (equal row lengths, token ids
below K, one label per sequence, a default head that exists).  ``properties/core/test_problem_files.py``
checks that the two agree: every file the loader accepts satisfies the schema, and every structural
malformation is rejected by both.

The problem files the package ships (``examples/`` in the repository, ``theory/examples`` once installed)
are found by :func:`shipped_example`: a path ``examples/NAME.json`` that does not exist where the command
runs is read from the installed package, so the documented commands work from any directory.
"""
from __future__ import annotations

import json
import math
from importlib import resources
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

__all__ = ["ASSUMPTION_TOL", "LOSSES", "Problem", "ProblemError", "schema", "shipped_example", "shipped_examples"]

#: The loss names a problem file may give (docs/problem-format.md).
LOSSES = ("log", "ce", "square", "exp", "lsq")
FILE_KEYS = {"embeddings", "head", "sequences", "labels", "loss"}
REQUIRED_KEYS = FILE_KEYS - {"head"}
#: Relative tolerance of the numerical assumption checks (C E^T = I, rank E = K).
ASSUMPTION_TOL = 1e-8


class ProblemError(ValueError):
    """Invalid problem input; the message is one line naming the field and index.

    Examples
    --------
    >>> Problem.from_json({"embeddings": [[1.0]], "sequences": [[0, 3]], "labels": [0], "loss": "log"})
    Traceback (most recent call last):
    ...
    theory.core.problem.ProblemError: sequences[0][1]: token id 3 out of range [0, 1)
    """


def schema() -> dict:
    """The problem file's JSON Schema (draft 2020-12), shipped with the package.

    Returns
    -------
    dict
        The schema document (``theory/core/problem.schema.json``).
    """
    return json.loads(resources.files("theory.core").joinpath("problem.schema.json").read_text())


def shipped_examples() -> list[str]:
    """Names of the problem files shipped with the package.

    Returns
    -------
    list of str
        ``NAME.json`` for each; :meth:`Problem.load` reads ``examples/NAME.json`` from the package when no
        such file exists where it runs.

    Examples
    --------
    >>> "scc_above_token.json" in shipped_examples()
    True
    """
    root = resources.files("theory").joinpath("examples")
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".json")) if root.is_dir() else []


def shipped_example(path) -> Path | None:
    """The shipped problem file that ``path`` names when it does not exist here.

    Parameters
    ----------
    path : str or os.PathLike
        ``examples/NAME.json`` or ``NAME.json``.

    Returns
    -------
    pathlib.Path or None
        The installed copy; ``None`` when ``path`` exists (a path that exists is never redirected), has
        another form, or names no shipped file.
    """
    p = Path(path)
    if p.exists() or p.suffix != ".json" or str(p.parent) not in (".", "examples"):
        return None
    candidate = resources.files("theory").joinpath("examples", p.name)
    return Path(str(candidate)) if candidate.is_file() else None


def _matrix(value, name: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        rows = value.tolist() if value.ndim == 2 else None
        if rows is None:
            raise ProblemError(f"{name}: expected a 2-d matrix, got an array with {value.ndim} dimensions")
        value = rows
    if not isinstance(value, (list, tuple)) or len(value) == 0:
        raise ProblemError(f"{name}: expected a non-empty list of rows")
    width = None
    for r, row in enumerate(value):
        if not isinstance(row, (list, tuple)) or len(row) == 0:
            raise ProblemError(f"{name}[{r}]: expected a non-empty list of numbers")
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise ProblemError(f"{name}[{r}]: ragged matrix, row has {len(row)} entries, row 0 has {width}")
        for c, x in enumerate(row):
            if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
                raise ProblemError(f"{name}[{r}][{c}]: expected a number, got {x!r}")
            if not math.isfinite(float(x)):
                raise ProblemError(f"{name}[{r}][{c}]: non-finite value {x!r}")
    return np.asarray(value, dtype=float)


def _token(x, name: str, K: int) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise ProblemError(f"{name}: expected an integer token id, got {x!r}")
    if not 0 <= int(x) < K:
        raise ProblemError(f"{name}: token id {int(x)} out of range [0, {K})")
    return int(x)


@dataclass(frozen=True, eq=False)
class Problem:
    """A validated next-token prediction problem for one self-attention layer.

    Token ids are 0-based; ``sequences[i][-1]`` is sample ``i``'s query and ``labels[i]`` its next token.
    Build one with :meth:`create`, :meth:`from_json` or :meth:`load`: they validate every field and raise
    :class:`ProblemError`; unmet *assumptions* are reported by :meth:`assumptions`, never raised.

    Attributes
    ----------
    E : numpy.ndarray
        The K x d embeddings, one row per token.
    C : numpy.ndarray
        The K x d linear head (default ``(E E^T)^-1 E``, biorthogonal: ``C E^T = I``).
    sequences : tuple of tuple of int
        The token sequences; the last token of each is its query.
    labels : tuple of int
        One label (next token) per sequence.
    loss : str
        One of :data:`LOSSES`.
    head_given : bool
        Whether the file gave the head (then :meth:`to_json` writes it back).

    Examples
    --------
    >>> p = Problem.load("examples/scc_above_token.json")
    >>> p.K, p.d, p.n, p.loss
    (4, 4, 3, 'log')
    >>> p.sequences[0], p.labels[0]
    ((0, 1, 2, 3), 0)
    >>> p.assumptions()
    {'head_biorthogonal': True, 'labels_in_sequences': True, 'embeddings_independent': True}
    """

    E: np.ndarray
    C: np.ndarray
    sequences: tuple[tuple[int, ...], ...]
    labels: tuple[int, ...]
    loss: str = "log"
    head_given: bool = field(default=False, repr=False)

    @classmethod
    def create(cls, embeddings, sequences, labels, loss: str = "log", head=None) -> "Problem":
        """A validated problem from its parts.

        Parameters
        ----------
        embeddings : array_like
            K x d numbers, finite.
        sequences : sequence of sequence of int
            Non-empty token sequences, ids in ``[0, K)``; the last token is the query.
        labels : sequence of int
            One token id per sequence.
        loss : str, default "log"
            One of :data:`LOSSES`.
        head : array_like, optional
            K x d; default ``(E E^T)^-1 E``, which needs linearly independent embeddings.

        Returns
        -------
        Problem

        Raises
        ------
        ProblemError
            On any malformed field, one line naming it and the index.

        Examples
        --------
        >>> p = Problem.create([[1, 0], [0, 1]], [[0, 1], [1, 1]], [0, 1])
        >>> p.C.tolist()
        [[1.0, 0.0], [0.0, 1.0]]
        """
        E = _matrix(embeddings, "embeddings")
        K, d = E.shape
        if head is None:
            gram = E @ E.T
            if np.linalg.matrix_rank(E, tol=ASSUMPTION_TOL * max(1.0, np.abs(E).max())) < K:
                raise ProblemError(
                    "head: no head given and the embeddings are linearly dependent "
                    f"(K={K}, d={d}), so the default head (E E^T)^-1 E does not exist")
            C = np.linalg.solve(gram, E)
        else:
            C = _matrix(head, "head")
            if C.shape != E.shape:
                raise ProblemError(f"head: shape {C.shape[0]}x{C.shape[1]} does not match embeddings {K}x{d}")
        if not isinstance(sequences, (list, tuple)) or len(sequences) == 0:
            raise ProblemError("sequences: expected a non-empty list of token sequences")
        seqs = []
        for i, seq in enumerate(sequences):
            if isinstance(seq, np.ndarray):
                seq = seq.tolist()
            if not isinstance(seq, (list, tuple)):
                raise ProblemError(f"sequences[{i}]: expected a list of token ids, got {seq!r}")
            if len(seq) == 0:
                raise ProblemError(f"sequences[{i}]: empty sequence (the last token is the query)")
            seqs.append(tuple(_token(x, f"sequences[{i}][{t}]", K) for t, x in enumerate(seq)))
        if isinstance(labels, np.ndarray):
            labels = labels.tolist()
        if not isinstance(labels, (list, tuple)):
            raise ProblemError(f"labels: expected a list of token ids, got {labels!r}")
        if len(labels) != len(seqs):
            raise ProblemError(f"labels: {len(labels)} labels for {len(seqs)} sequences")
        labs = tuple(_token(y, f"labels[{i}]", K) for i, y in enumerate(labels))
        if loss not in LOSSES:
            raise ProblemError(f"loss: unknown loss {loss!r}, expected one of {', '.join(LOSSES)}")
        return cls(E=E, C=C, sequences=tuple(seqs), labels=labs, loss=loss, head_given=head is not None)

    # -- sizes -------------------------------------------------------------------------------
    @property
    def K(self) -> int:
        """The vocabulary size (rows of ``E``)."""
        return self.E.shape[0]

    @property
    def d(self) -> int:
        """The embedding dimension (columns of ``E``)."""
        return self.E.shape[1]

    @property
    def n(self) -> int:
        """The number of samples."""
        return len(self.sequences)

    @property
    def queries(self) -> np.ndarray:
        """The query (last token) of each sample, an int64 array of length n."""
        return np.array([s[-1] for s in self.sequences], dtype=np.int64)

    @property
    def label_array(self) -> np.ndarray:
        """The labels as an int64 array of length n."""
        return np.array(self.labels, dtype=np.int64)

    @cached_property
    def counts(self) -> np.ndarray:
        """The n x K matrix of token counts (without positional encoding a sample matters only through these)."""
        X = np.zeros((self.n, self.K))
        for i, seq in enumerate(self.sequences):
            np.add.at(X[i], list(seq), 1.0)
        return X

    @cached_property
    def H(self) -> np.ndarray:
        """Head in token space, ``H = C E^T``: sample i's logits are ``H a_i`` (a_i its attention over tokens)."""
        return self.C @ self.E.T

    @cached_property
    def gram(self) -> np.ndarray:
        """``E E^T`` (K x K)."""
        return self.E @ self.E.T

    # -- assumptions (reported, not raised) --------------------------------------------------------
    def assumptions(self) -> dict[str, bool]:
        """Which of the paper's assumptions this problem meets (reported, never raised).

        Returns
        -------
        dict of str to bool
            ``head_biorthogonal`` (Assumption 1, ``C E^T = I`` to :data:`ASSUMPTION_TOL`),
            ``labels_in_sequences`` (Assumption 2) and ``embeddings_independent`` (rank ``E`` = K); the
            tolerances are those of :meth:`assumption_residuals`.
        """
        res = self.assumption_residuals()
        in_seq = all(y in seq for y, seq in zip(self.labels, self.sequences))
        independent = bool(self.K <= self.d and res["embeddings_independent"][0] > res["embeddings_independent"][1])
        head, tol = res["head_biorthogonal"]
        return {"head_biorthogonal": bool(head <= tol), "labels_in_sequences": in_seq,
                "embeddings_independent": independent}

    def assumption_residuals(self) -> dict[str, tuple[float, float]]:
        """The numerical assumptions as ``(measured, tolerance)``: the one place their tolerances live.

        * ``head_biorthogonal``: ``max |C E^T - I|`` against ``ASSUMPTION_TOL · max(1, ||C||₂ ||E||₂)``
          (holds when measured <= tolerance).  Rounding in ``C E^T`` is ~eps ||C|| ||E||, and a head
          computed from ill-conditioned E carries ~eps cond(E) more, so the tolerance scales with
          ``||C|| ||E||`` (>= cond(E) for the default head).
        * ``embeddings_independent``: the K-th singular value of E against ``ASSUMPTION_TOL ·
          max(1, max|E|)`` (holds when measured > tolerance; 0 when K > d), numpy's rank test."""
        K = self.K
        scale = max(1.0, float(np.abs(self.E).max()))
        sv = np.linalg.svd(self.E, compute_uv=False)
        sigma_k = float(sv[K - 1]) if K <= self.d else 0.0
        scale_h = max(1.0, float(np.linalg.norm(self.C, 2) * np.linalg.norm(self.E, 2)))
        return {"head_biorthogonal": (float(np.abs(self.H - np.eye(K)).max()), ASSUMPTION_TOL * scale_h),
                "embeddings_independent": (sigma_k, ASSUMPTION_TOL * scale)}

    # -- files --------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """The problem file's JSON document (``head`` only when the file gave one).

        Returns
        -------
        dict
            Keys ``embeddings``, ``head`` (optional), ``sequences``, ``labels``, ``loss``;
            ``Problem.from_json(p.to_json())`` rebuilds ``p``.
        """
        out = {"embeddings": self.E.tolist()}
        if self.head_given:
            out["head"] = self.C.tolist()
        out.update(sequences=[list(s) for s in self.sequences], labels=list(self.labels), loss=self.loss)
        return out

    def _repr_pretty_(self, printer, cycle) -> None:
        """How Hypothesis prints a drawn problem (a failing example, the report's observations): the
        problem file's JSON, exact (floats in shortest round-trip form), inside an expression that rebuilds
        it; ``python -m theory analyze`` reads the same JSON.  Hypothesis's generic printer formatted the
        arrays field by field through numpy's array printer for every test case while observations are
        on, several percent of a run (see benchmarks/RESULTS.md)."""
        printer.text(f"Problem.from_json({json.dumps(self.to_json(), separators=(', ', ': '))})")

    def save(self, path) -> None:
        """Write :meth:`to_json` to ``path`` (a problem file :meth:`load` reads back)."""
        Path(path).write_text(json.dumps(self.to_json(), indent=1))

    @classmethod
    def from_json(cls, doc) -> "Problem":
        """A validated problem from a problem file's JSON document.

        Parameters
        ----------
        doc : dict
            Keys ``embeddings``, ``sequences``, ``labels``, ``loss`` and optionally ``head`` (no other).

        Returns
        -------
        Problem

        Raises
        ------
        ProblemError
            On an unknown or missing key, or a malformed field (see :meth:`create`).

        Examples
        --------
        >>> Problem.from_json({"embeddings": [[1, 0], [0, 1]], "sequences": [[0, 1]], "labels": [0],
        ...                    "loss": "log"}).n
        1
        """
        if not isinstance(doc, dict):
            raise ProblemError("file: expected a JSON object with keys " + ", ".join(sorted(FILE_KEYS)))
        unknown = set(doc) - FILE_KEYS
        if unknown:
            raise ProblemError(f"{sorted(unknown)[0]!r}: unknown key (allowed: {', '.join(sorted(FILE_KEYS))})")
        missing = REQUIRED_KEYS - set(doc)
        if missing:
            raise ProblemError(f"{sorted(missing)[0]}: missing key")
        return cls.create(doc["embeddings"], doc["sequences"], doc["labels"], doc["loss"], doc.get("head"))

    @classmethod
    def load(cls, path) -> "Problem":
        """Read and validate a problem file.

        Parameters
        ----------
        path : str or os.PathLike
            A JSON problem file (docs/problem-format.md); ``examples/NAME.json`` that does not exist here is
            read from the installed package (:func:`shipped_example`).

        Returns
        -------
        Problem

        Raises
        ------
        ProblemError
            When the file cannot be read, is not UTF-8 JSON, or is not a valid problem; the message is one
            line starting ``file PATH:`` or naming the field.
        """
        path = shipped_example(path) or path
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ProblemError(f"file {path}: cannot read ({exc.strerror or exc})") from None
        except UnicodeDecodeError as exc:  # e.g. a binary file: the same one-line 'file X:' message as the rest
            raise ProblemError(f"file {path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                               f"{exc.start}); a problem file is JSON") from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProblemError(f"file {path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
        return cls.from_json(doc)

    # -- transformations used by the invariance properties --------------------------------------
    def replace(self, **kw) -> "Problem":
        """A copy with some fields replaced (``embeddings``, ``sequences``, ``labels``, ``loss``, ``head``).

        Returns
        -------
        Problem
            Validated again, like :meth:`create`.

        Examples
        --------
        >>> Problem.load("examples/scc_above_token.json").replace(loss="exp").loss
        'exp'
        """
        doc = {"embeddings": self.E, "sequences": self.sequences, "labels": self.labels, "loss": self.loss,
               "head": self.C if self.head_given else None}
        doc.update(kw)
        return Problem.create(doc["embeddings"], doc["sequences"], doc["labels"], doc["loss"], doc["head"])

    def relabel(self, perm) -> "Problem":
        """The same problem with token ``t`` renamed ``perm[t]``; embeddings and head rows move with their tokens.

        Parameters
        ----------
        perm : array_like of int
            A permutation of ``range(K)``.

        Returns
        -------
        Problem
        """
        perm = np.asarray(perm)
        inv = np.argsort(perm)
        return Problem.create(self.E[inv], [[int(perm[t]) for t in s] for s in self.sequences],
                              [int(perm[y]) for y in self.labels], self.loss,
                              self.C[inv] if self.head_given else None)

    def rotate(self, U) -> "Problem":
        """The same problem in rotated coordinates: embeddings and head become ``E U``, ``C U``.

        Parameters
        ----------
        U : numpy.ndarray
            An orthogonal d x d matrix.

        Returns
        -------
        Problem
            Its trained ``W`` (and ``W^svm``, ``W^fin``) are ``U^T W U``.
        """
        return Problem.create(self.E @ U, self.sequences, self.labels, self.loss,
                              self.C @ U if self.head_given else None)
