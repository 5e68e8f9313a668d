"""Does ``hypothesis.target`` find higher scores than pure generation?  Measured on a theorem property.

    .venv/bin/python benchmarks/targeting.py [--property theorem2|theorem1] [--examples 200] [--seeds 0 1 2]

For each seed the property's body runs twice with the same example budget: phases ``generate`` only, and
``generate`` + ``target`` (Hypothesis's hill climbing on the scores the body hands to ``target()``).  The
table gives, per target label, the best score each reached (1 = at the criterion's threshold, larger =
closer to or past a violation) and the ratio.  A failing example stops a run early; it is reported.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis.statistics import collector  # noqa: E402


def property_under_test(name: str):
    from hypothesis import strategies as st

    from benchmarks.collected import property_function

    if name == "theorem2":
        from properties.li2024.runs import NONZERO_SVM, REGPATH_CONDITION
        from strategies.problems import drawn_problems

        fn = property_function("properties/li2024/test_theorem2.py::test_theorem2_regularization_path_converges")
        return fn.hypothesis.inner_test, {"dp": drawn_problems(structures=NONZERO_SVM, max_condition=REGPATH_CONDITION)}
    if name == "theorem1":
        from properties.li2024.runs import step_fractions

        fn = property_function(
            "properties/li2024/test_theorem1.py::test_gd_log_loss_converges_to_svm_direction_and_finite_part")
        return fn.hypothesis.inner_test, {"data": st.data(), "fraction": step_fractions}
    raise SystemExit(f"error: unknown property {name!r} (theorem1, theorem2)")


def run(body, strategies, examples: int, random_seed: int, phases) -> tuple[dict, str, float]:
    stats: list = []

    @settings(max_examples=examples, database=None, deadline=None, derandomize=False, phases=phases,
              suppress_health_check=list(HealthCheck))
    @seed(random_seed)
    @given(**strategies)
    def prop(**kw):
        body(**kw)

    t0 = time.time()
    outcome = "passed"
    with collector.with_value(stats.append):
        try:
            prop()
        except Exception as exc:  # a failing example: the scores up to it still count
            outcome = f"failed ({type(exc).__name__})"
    return (stats[-1].get("targets", {}) if stats else {}), outcome, time.time() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--property", default="theorem2")
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    a = ap.parse_args(argv)
    body, strategies = property_under_test(a.property)
    print(f"| seed | target | generate only | generate + target | ratio |")
    print("|---|---|---|---|---|")
    for s in a.seeds:
        plain, out_p, t_p = run(body, strategies, a.examples, s, [Phase.generate])
        aimed, out_a, t_a = run(body, strategies, a.examples, s, [Phase.generate, Phase.target])
        for label in sorted(set(plain) | set(aimed)):
            p, q = plain.get(label, float("nan")), aimed.get(label, float("nan"))
            print(f"| {s} | {label} | {p:.4g} | {q:.4g} | {q / p if p else float('nan'):.3g} |")
        print(f"| {s} | (run) | {out_p}, {t_p:.0f} s | {out_a}, {t_a:.0f} s | |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
