"""CPU time of the Scan and Snap properties with the numpy reference vs the compiled (numba) dynamics.

    .venv/bin/python benchmarks/bench_scansnap.py [--profile ci|dev|stress] [--markdown] [-k SUBSTRING]
                                                  [--engines numpy,compiled]

Every number comes from this one process: each property of ``properties/test_scansnap_*.py`` (the
parametrized bad-input tests excepted: they integrate nothing) runs twice, once with
``theory.tian2023.model.ENGINE = "numpy"`` (the integrator and population GD before the rework) and once with
``"compiled"``, at the profile's example counts.  The profile is derandomized for the benchmark (database
off), so both runs see the same examples.  Times are CPU seconds of this process (``time.process_time``),
robust to other load on the machine; compilation is loaded from numba's cache before anything is timed.
"""
from __future__ import annotations

import argparse
import inspect
import os
import platform
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MODULES = ["properties/tian2023/test_model.py", "properties/tian2023/test_theorems.py",
           "properties/tian2023/test_reproductions.py"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="ci", choices=["ci", "dev", "stress"])
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("-k", default="", help="only properties whose name contains this")
    ap.add_argument("--engines", default="numpy,compiled", help="which engines to time (ratio needs both)")
    args = ap.parse_args(argv)

    from hypothesis import settings

    import conftest  # noqa: F401  (registers the profiles)
    settings.register_profile("bench", parent=settings.get_profile(args.profile), derandomize=True, database=None)
    settings.load_profile("bench")       # before the test modules compute FEW from max_examples

    import numpy as np

    import theory.tian2023.model as ss
    from theory.tian2023.model import integrate, population_gd, syn_layout

    cl = syn_layout(1, 2, 1, 2)          # load (or compile once) the kernels outside the timings
    integrate(cl, 1.0, eta_y=1.0, eta_z=1.0, decoder="free", n_eval=2)
    integrate(cl, 1.0, eta_y=1.0, eta_z=1.0, decoder="tied", n_eval=2)
    population_gd(cl, steps=1, eta_y=1.0, eta_z=1.0)

    from benchmarks.collected import collect

    tests = []
    for item in collect(*(os.path.join(ROOT, m) for m in MODULES)):  # pytest imports the test modules
        fn, fname = item.function, item.function.__name__
        if args.k not in fname or hasattr(item, "callspec"):  # parametrized: bad-input tests
            continue
        if not hasattr(fn, "hypothesis") and inspect.signature(fn).parameters:
            continue
        tests.append((item.module.__name__.split(".")[-1], fname, fn))

    rows = []
    engines = args.engines.split(",")
    tot = {"numpy": 0.0, "compiled": 0.0}
    for mod, fname, fn in tests:
        r = {"numpy": float("nan"), "compiled": float("nan")}
        for engine in engines:
            ss.ENGINE = engine
            t0 = time.process_time()
            fn()
            r[engine] = time.process_time() - t0
            tot[engine] += r[engine]
        ss.ENGINE = "compiled"
        rows.append((f"{mod}::{fname}", r["numpy"], r["compiled"]))
        print(f"  {fname}: numpy {r['numpy']:.2f} s, compiled {r['compiled']:.2f} s", file=sys.stderr, flush=True)
    rows.append(("**all Scan and Snap properties**" if args.markdown else "ALL", tot["numpy"], tot["compiled"]))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"Scan and Snap properties, profile {args.profile} (derandomized), CPU seconds in one process; "
          f"{platform.machine()}, python {platform.python_version()}, numpy {np.__version__}, load average {load:.1f}")
    header = ["property", "numpy (s)", "compiled (s)", "numpy / compiled"]
    lines = [[n, f"{a:.2f}", f"{b:.2f}", f"{a / b:.1f}x" if b > 0 and len(engines) == 2 else "-"] for n, a, b in rows]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|---|---:|---:|---:|")
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
        for line in [header] + lines:
            print("  ".join(x.ljust(widths[0]) if i == 0 else x.rjust(widths[i]) for i, x in enumerate(line)))


if __name__ == "__main__":
    main()
