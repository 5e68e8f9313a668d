"""Every claim the suite checks, one registry (:class:`theory.core.claims.Claim`), grouped by paper."""
from __future__ import annotations

from theory.core.claims import Claim

__all__ = ["all_claims", "claim"]


def all_claims() -> list[Claim]:
    """The claims of both papers: Li et al. 2024 first, then Tian et al. 2023."""
    from theory.li2024.claims import CLAIMS as LI
    from theory.tian2023.claims import CLAIMS as TIAN

    return [*LI, *TIAN]


def claim(name: str) -> Claim:
    """The claim called ``name`` (``li2024.theorem1``; the part after the dot is accepted alone when unique)."""
    found = [c for c in all_claims() if c.name == name or c.name.split(".", 1)[1] == name]
    if len(found) != 1:
        names = ", ".join(c.name for c in all_claims())
        raise KeyError(f"unknown or ambiguous claim {name!r} (one of: {names})")
    return found[0]
