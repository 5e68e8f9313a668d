"""Hypothesis example databases of the suite: local by default, pooled in a Redis server on request.

One setting, the environment variable ``ATTN_SUITE_REDIS`` (``redis://host:port/db``), switches the pooled
database on.  Without it nothing changes: the profiles keep Hypothesis's default database (a local
directory), and the derandomized ``ci``/``dev`` profiles keep none at all.

With it (see the README, "Beyond one machine"):

* ``fuzz`` -- worker machines: random, many examples, and every counterexample is saved locally *and* in
  Redis (``MultiplexedDatabase(local, shared)``).
* ``stress`` and ``deep`` -- read the pool: ``MultiplexedDatabase(local, ReadOnlyDatabase(shared))``, so a
  counterexample found on any machine is replayed first (Hypothesis's reuse phase) and never overwritten.
* ``ci`` and ``dev`` stay derandomized and database-free: Hypothesis ties ``derandomize=True`` to
  ``database=None`` (its own built-in ``ci`` profile, loaded when a CI variable is set, does the same).

Database keys are a hash of each test's source, so every machine must run the same commit.

The shared database never breaks a run: a Redis error (server gone, network down, timeout) prints one
warning naming the URL and the operation, and from then on this process uses its local database only
(every example is still saved there).
"""
from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

from hypothesis.database import (DirectoryBasedExampleDatabase, ExampleDatabase, MultiplexedDatabase,
                                 ReadOnlyDatabase)

REDIS_ENV = "ATTN_SUITE_REDIS"
LOCAL_ENV = "ATTN_SUITE_LOCAL_DB"  # the local directory (default: <project>/.hypothesis/examples)
# Profiles that read the pool (random ones: a derandomized profile cannot have a database).
READERS = ("stress", "deep")
WRITERS = ("fuzz",)

__all__ = ["REDIS_ENV", "LOCAL_ENV", "SharedDatabaseWarning", "TolerantDatabase", "shared_url",
           "shared_database", "profile_database", "uses_shared"]


class SharedDatabaseWarning(UserWarning):
    """The shared (Redis) example database failed; the run goes on with its local database."""


class TolerantDatabase(ExampleDatabase):
    """Wraps a remote database: the first error is reported once (a warning and a line on stderr) and the
    database is then switched off for the rest of the process (fetch returns nothing, writes are dropped),
    so a dead server costs one timeout, not one per example."""

    def __init__(self, db: ExampleDatabase, label: str):
        super().__init__()
        self.db = db
        self.label = label
        self.failed: str | None = None

    def __repr__(self) -> str:
        return f"TolerantDatabase({self.db!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, TolerantDatabase) and self.db == other.db

    def __hash__(self) -> int:
        return hash(("TolerantDatabase", self.label))

    def _fail(self, op: str, exc: BaseException) -> None:
        self.failed = f"{type(exc).__name__}: {exc}"
        msg = (f"shared example database {self.label} unavailable during {op} ({self.failed}); "
               f"continuing with the local database only (nothing found in this run is lost locally)")
        print(f"\nWARNING: {msg}", file=sys.__stderr__, flush=True)
        warnings.warn(msg, SharedDatabaseWarning, stacklevel=3)

    def _call(self, op, *args):
        if self.failed is not None:
            return None
        try:
            return getattr(self.db, op)(*args)
        except Exception as exc:  # redis.RedisError, OSError, ...: never the test's outcome
            self._fail(op, exc)
            return None

    def fetch(self, key: bytes):
        if self.failed is not None:
            return iter(())
        try:
            values = list(self.db.fetch(key))
        except Exception as exc:
            self._fail("fetch", exc)
            return iter(())
        return iter(values)

    def save(self, key: bytes, value: bytes) -> None:
        self._call("save", key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        self._call("delete", key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._call("move", src, dest, value)


def shared_url() -> str | None:
    url = os.environ.get(REDIS_ENV, "").strip()
    return url or None


def _redacted(url: str) -> str:
    """The URL without a password, for messages."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def shared_database(url: str) -> TolerantDatabase:
    """``RedisExampleDatabase`` on ``url`` behind :class:`TolerantDatabase` (connect/socket timeouts 3 s)."""
    from hypothesis.extra.redis import RedisExampleDatabase
    from redis import Redis

    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"{REDIS_ENV}: expected a redis:// URL, got {_redacted(url)!r}")
    client = Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    return TolerantDatabase(RedisExampleDatabase(client), _redacted(url))


def local_database(root: Path) -> DirectoryBasedExampleDatabase:
    path = os.environ.get(LOCAL_ENV) or str(root / ".hypothesis" / "examples")
    return DirectoryBasedExampleDatabase(path)


_CACHE: dict = {}


def profile_database(profile: str, root: Path) -> ExampleDatabase | None:
    """The database for ``profile`` when ``ATTN_SUITE_REDIS`` is set, else ``None`` (= leave the profile
    alone).  One shared client per process."""
    url = shared_url()
    if url is None or profile not in READERS + WRITERS:
        return None
    if url not in _CACHE:
        _CACHE[url] = shared_database(url)
    shared = _CACHE[url]
    local = local_database(root)
    return MultiplexedDatabase(local, shared if profile in WRITERS else ReadOnlyDatabase(shared))


def uses_shared(db) -> bool:
    """Whether a settings' database reads or writes the pool (then a fixed seed must not be forced: a
    ``--hypothesis-seed`` turns Hypothesis's database off)."""
    if db is None:
        return False
    if isinstance(db, TolerantDatabase):
        return True
    inner = getattr(db, "_wrapped", None)  # ReadOnlyDatabase: one database; MultiplexedDatabase: a tuple
    if isinstance(inner, tuple):
        return any(uses_shared(d) for d in inner)
    return inner is not None and uses_shared(inner)
