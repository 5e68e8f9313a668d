"""The claims of Tian et al. 2023 ("Scan and Snap") that the suite checks, as objects.

They are statements about the paper's data model (query fixed by the next token, contextual tokens drawn
from ``P(l | n)``) and its reparameterized dynamics, checked on the experiments of this package
(:mod:`theory.tian2023.model`, :mod:`theory.tian2023.snap`, :mod:`theory.tian2023.adam`,
:mod:`theory.tian2023.recall`); a problem file of Li et al.'s format does not carry that model, so
``check`` lists them as not applicable to it; in Python, ``claim("tian2023.theorem4").check(classes)``
judges a class layout.
"""
from __future__ import annotations

from theory.core.claims import Assumption, Claim
from theory.core.decision import Outcome, Verdict

PAPER = "Tian, Wang, Chen, Du (2023), Scan and Snap: Understanding Training Dynamics and Token Composition in 1-layer Transformer"

def _is_classes(x) -> bool:
    """A Scan and Snap data model: the class layout of :func:`theory.tian2023.model.make_classes`."""
    return hasattr(x, "distinct_tokens") and hasattr(x, "P")


DATA_MODEL = Assumption("Scan and Snap data model",
                        "a class layout P(l | n) with the query fixed by the next token (theory.tian2023.model; "
                        "not a Li et al. problem file)", _is_classes)


def _deterministic(violations: list[str], measures: dict) -> Verdict:
    """A criterion on the integrated dynamics with its certified tolerance: holds or fails, nothing undecided."""
    if violations:
        return Verdict(Outcome.FAILS, measures, reason_text="; ".join(violations[:3]))
    return Verdict(Outcome.HOLDS, measures)


def judge_theorem2(classes, budget_scale: float = 1.0) -> Verdict:
    """Theorem 2 on the tied-decoder dynamics at eta_Y/eta_Z = 3 up to t = 300 (the property's setting)."""
    from theory.tian2023.model import integrate
    from theory.tian2023.verdicts import ATOL, RTOL, theorem2_violations

    tr = integrate(classes, 300.0 * budget_scale, eta_y=3.0, eta_z=1.0, decoder="tied", n_eval=30, rtol=RTOL, atol=ATOL)
    return _deterministic(theorem2_violations(tr), {"t_end": 300.0 * budget_scale})


def judge_theorem3(classes, budget_scale: float = 1.0) -> Verdict:
    """Theorem 3's scan order from Z(0) = 0 on the tied-decoder dynamics (eta_Y/eta_Z = 3, t <= 300)."""
    from theory.tian2023.model import integrate
    from theory.tian2023.verdicts import scan_violations

    tr = integrate(classes, 300.0 * budget_scale, eta_y=3.0, eta_z=1.0, decoder="tied", n_eval=30)
    return _deterministic(scan_violations(tr), {"t_end": 300.0 * budget_scale})


def judge_theorem4(classes, budget_scale: float = 1.0) -> Verdict:
    """Theorem 4's snap (three-valued over 300 t_0 and 3000 t_0, :func:`theory.tian2023.verdicts.snap_decide`)."""
    from theory.tian2023.model import snap_time_estimate
    from theory.tian2023.verdicts import snap_decide

    return snap_decide(classes, 1.0, snap_time_estimate(classes, 1.0))


def _claim(name, reference, statement, rule, calibrations, properties, judge=None, scales_budget=True):
    return Claim(f"tian2023.{name}", PAPER, reference, statement, (DATA_MODEL,), rule, calibrations, properties, judge,
                 scales_budget=scales_budget)


THEOREM2 = _claim("theorem2", "Theorem 2", "distinct tokens' attention logits grow and a single common token's shrinks",
                  "signs of dz/dt over the simulated dynamics, per token class",
                  ("a planted sign flip of the common token's drift",), ("properties/tian2023/test_theorems.py",),
                  judge_theorem2)
THEOREM3 = _claim("theorem3", "Theorem 3 (scan)",
                  "the relative gain r(t) = r(0) e^{2(z_l - z_l(0))}; the most probable distinct token dominates and "
                  "lower-probability tokens are overtaken first",
                  "the identity to integrator tolerance, the ordering of the logits at the end of the run",
                  ("a permuted probability order",), ("properties/tian2023/test_theorems.py",), judge_theorem3)
THEOREM4 = _claim("theorem4", "Theorem 4 (snap)",
                  "the dominant logit's growth turns logarithmic near t₀ ≈ 2K ln M / η_Y; a larger η_Y snaps earlier "
                  "and leaves denser attention",
                  "the snap's late exponent three-valued over 300 t₀ and 3000 t₀; snap time and final entropy ordered "
                  "with η_Y, judged against the entropies' certified errors",
                  ("linear and bounded continuations", "a tie at uniform attention", "the other rate moved too"),
                  ("properties/tian2023/test_theorems.py",), judge_theorem4, scales_budget=False)
FIGURES = _claim("figures", "Figures 3, 5, 8, 9, 11, 12",
                 "the figures' calibrated claims: snap ordering (Fig. 3, 9), Lemma 7 gap decay (Fig. 8), Adam overlap "
                 "(Fig. 5), recall curves (Fig. 11, 12)",
                 "each figure's stated criterion on a reduced run, with a control that must fail it",
                 ("each figure's planted control",), ("properties/tian2023/test_figures.py",
                                                      "properties/tian2023/test_reproductions.py"))

CLAIMS = (THEOREM2, THEOREM3, THEOREM4, FIGURES)
