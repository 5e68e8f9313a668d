"""Judged, not just generated: what a property says about how many examples it actually judged.

A property that passes says "the theorem held on the examples I judged".  Examples it cannot judge (a
budget that does not fit, a radius not certifiable in float64, a graph with nothing to check) are
rejected with :func:`not_judged`, which names the reason as a Hypothesis event (``not judged: REASON``)
and rejects the example, so Hypothesis draws another in its place.  The report plugin counts, per
property, the judged examples and the rejected ones by reason (from Hypothesis's own statistics), and a
property marked ``@pytest.mark.judged(floor=F)`` fails, with the counts in its message, when fewer than
``F`` of its generated examples were judged (under every profile).

:func:`aim` steers the search toward the edge: it hands Hypothesis the criterion's own distance to its
threshold (``hypothesis.target``; larger = closer to a violation) and records the example that reached the
best score, which the report shows per label.
"""
from __future__ import annotations

from typing import NoReturn

from hypothesis import assume, event, settings, target

from reports.record import record_target

NOT_JUDGED = "not judged: "
# The ci profile's max_examples: budgets written for it scale with the loaded profile (see scaled()).
CI_EXAMPLES = 25

__all__ = ["NOT_JUDGED", "aim", "margin", "not_judged", "scaled"]


def not_judged(reason: str) -> NoReturn:
    """Reject this example, counted under ``reason`` (one short phrase, the same for every such example)."""
    event(NOT_JUDGED + reason)
    assume(False)
    raise AssertionError("unreachable: assume(False) returned")  # pragma: no cover


def aim(label: str, score: float, example: str | None = None) -> None:
    """``hypothesis.target(score, label)`` plus the report's record of the best example per label.

    ``score`` must grow toward a violation of the property's criterion (e.g. ``rate / threshold``);
    ``example`` is what a reader needs to replay it (a problem file's JSON)."""
    score = float(score)
    if score != score:  # NaN: Hypothesis rejects it, and it says nothing about the edge
        return
    target(score, label=label)
    record_target(label, score, example)


def scaled(n: int) -> int:
    """``n`` examples under the ci profile, scaled like the loaded profile's ``max_examples``: a property
    with its own budget (expensive bodies) still gets many more examples under ``stress`` and ``deep``."""
    return max(1, round(n * settings.default.max_examples / CI_EXAMPLES))


def margin(statistic: str, side: str, value: float) -> None:
    """Record one measured value of a verdict's ``statistic`` on a ``valid`` run or a ``planted`` violation.

    ``benchmarks/margins.py`` reads them back from a run's report data and prints, per statistic, the worst
    valid value against the mildest planted one: the measured margin around the decision's zones."""
    from reports.record import record_metrics

    value = float(value)
    if value == value and side in ("valid", "planted"):
        record_metrics(**{f"margin/{statistic}/{side}": value})

