"""An experiment's protocol as data: what the paper or its authors' code fixes, printed in the experiment's
JSON and pinned by a test, so a silent change of one constant (the initial distribution, a threshold) fails.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

__all__ = ["Protocol"]


@dataclass(frozen=True)
class Protocol:
    """``sizes``: the data's dimensions; ``data``: how datasets are drawn; ``init``: the initial weights'
    distribution, by name, with its parameters in ``init_params`` (``uniform``: ``W(0) ~ U(-b, b)`` with
    ``b = d ** bound_exponent``; ``gaussian``: ``W(0) = scale * N(0, 1)``); ``step_size``, ``steps`` and
    ``normalized`` the optimizer; ``thresholds`` the experiment's own cut-offs; ``source`` where each number
    comes from."""

    source: str
    sizes: dict
    data: str
    init: str
    init_params: dict
    step_size: float
    steps: int
    normalized: bool
    thresholds: dict = field(default_factory=dict)

    def init_bound(self, d: int) -> float:
        """``b`` of a uniform ``U(-b, b)`` init in dimension ``d``."""
        if self.init != "uniform":
            raise ValueError(f"init {self.init!r} has no uniform bound")
        return float(d) ** self.init_params["bound_exponent"]

    def as_dict(self) -> dict:
        return asdict(self)
