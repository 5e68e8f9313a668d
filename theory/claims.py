"""Every claim the suite checks, one registry (:class:`theory.core.claims.Claim`), grouped by paper.

The built-in claims (Li et al. 2024, then Tian et al. 2023) come first; claims of other packages follow,
found through the entry-point group ``attention_tpg_suite.claims`` (docs/adding-claims.md).  Each entry
point names either a callable returning an iterable of :class:`~theory.core.claims.Claim` objects or such
an iterable itself.  A name already taken keeps its first claim; an entry point that cannot be loaded or
returns something else is skipped with a one-line warning naming it, so a broken plugin never stops
``tpg check``, the report or the documentation.

Examples
--------
>>> from theory.claims import all_claims, claim
>>> [c.name for c in all_claims()][:2]
['li2024.theorem1', 'li2024.theorem2']
>>> claim("theorem1").reference
'Theorem 1'
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable

from theory.core.claims import Claim

__all__ = ["ENTRY_POINT_GROUP", "ClaimPluginWarning", "all_claims", "claim", "plugin_claims"]

#: The entry-point group through which another package adds claims (``[project.entry-points."..."]``).
ENTRY_POINT_GROUP = "attention_tpg_suite.claims"


class ClaimPluginWarning(UserWarning):
    """An entry point of :data:`ENTRY_POINT_GROUP` that could not be loaded or gave no claims."""


def _entry_points():
    from importlib.metadata import entry_points

    return list(entry_points(group=ENTRY_POINT_GROUP))


def plugin_claims() -> list[Claim]:
    """The claims other packages register under the entry-point group :data:`ENTRY_POINT_GROUP`.

    Returns
    -------
    list of Claim
        In entry-point order (sorted by name, then value, so the order does not depend on the order
        in which the distributions were installed).  An entry point that fails to load, raises, or yields
        anything but :class:`~theory.core.claims.Claim` objects contributes nothing and triggers one
        :class:`ClaimPluginWarning` naming it.
    """
    found: list[Claim] = []
    for ep in sorted(_entry_points(), key=lambda e: (e.name, e.value)):
        try:
            obj = ep.load()
            items = obj() if callable(obj) else obj
            if not isinstance(items, Iterable):
                raise TypeError(f"expected an iterable of Claim objects, got {type(items).__name__}")
            items = list(items)
            bad = [x for x in items if not isinstance(x, Claim)]
            if bad:
                raise TypeError(f"expected Claim objects, got a {type(bad[0]).__name__}")
        except Exception as exc:  # a broken plugin is a warning, never a crash
            msg = " ".join(f"{type(exc).__name__}: {exc}".split())
            warnings.warn(f"claims entry point {ep.name!r} ({ep.value}) skipped: {msg}", ClaimPluginWarning,
                          stacklevel=2)
            continue
        found += items
    return found


def all_claims() -> list[Claim]:
    """Every claim: Li et al. 2024's, then Tian et al. 2023's, then those of other packages.

    Returns
    -------
    list of Claim
        The built-in claims first, then :func:`plugin_claims`; a claim whose name is already taken is
        dropped (with a :class:`ClaimPluginWarning`), so the names are unique.

    Examples
    --------
    >>> names = [c.name for c in all_claims()]
    >>> len(names) == len(set(names)) and "tian2023.theorem4" in names
    True
    """
    from theory.li2024.claims import CLAIMS as LI
    from theory.li2024.factorized_claims import CLAIMS as LI_KQ
    from theory.tian2023.claims import CLAIMS as TIAN

    out, seen = [], set()
    builtin = [*LI, *LI_KQ, *TIAN]
    for i, c in enumerate([*builtin, *plugin_claims()]):
        if c.name in seen:
            if i >= len(builtin):
                warnings.warn(f"claim {c.name!r} from an entry point skipped: the name is already taken",
                              ClaimPluginWarning, stacklevel=2)
            continue
        seen.add(c.name)
        out.append(c)
    return out


def claim(name: str) -> Claim:
    """The claim called ``name``.

    Parameters
    ----------
    name : str
        The full name (``li2024.theorem1``) or, when no other claim shares it, the part after the first
        dot (``theorem1``; ``theorem2`` is ambiguous: both papers have one).

    Returns
    -------
    Claim

    Raises
    ------
    KeyError
        When no claim or several claims answer to ``name``; the message lists every name.

    Examples
    --------
    >>> claim("tian2023.theorem4").reference
    'Theorem 4 (snap)'
    """
    claims = all_claims()
    found = [c for c in claims if c.name == name] or [c for c in claims if c.name.split(".", 1)[-1] == name]
    if len(found) != 1:
        names = ", ".join(c.name for c in claims)
        raise KeyError(f"unknown or ambiguous claim {name!r} (one of: {names})")
    return found[0]
