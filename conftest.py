"""Hypothesis profiles and the report plugin.

Profiles (choose with ``--hypothesis-profile=NAME``; default ``ci``):

* ``ci``     -- the test command and CI: few examples per property, derandomized so a red CI replays.
* ``stress`` -- the main job: many times more examples, random seeds (the report gives the replay seed).
* ``deep``   -- long unattended runs: 2000 random examples per theorem property (properties with their own
  budget scale with it through ``properties.judging.scaled``: 80x their ci budget).
* ``dev``    -- a quick local loop.
* ``fuzz``   -- worker machines of a long hunt: 10,000 random examples per property.  With
  ``ATTN_SUITE_REDIS=redis://host:port/db`` every counterexample is also saved in that shared Redis, and
  ``stress``/``deep`` replay the pool first (read-only); see ``suite_db`` and the README, "Beyond one
  machine".  Without the variable nothing changes.

Training properties set ``deadline=None`` themselves: a GD run is slow by nature, not by accident.

One BLAS thread per process: the suite's matrices are K x K with K <= 12, far below what a second thread
speeds up, and under ``pytest -n 2`` on two cores each worker's OpenBLAS kept a second thread spinning
(stress seed 777777, the Theorem 1, automaton and Section 5 modules: 116 s of wall with the default two
threads per process, 78 s with one; Theorem 1's wrong-target calibration 26 s -> 14 s).  A value the user
set in the environment is kept.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # for the libraries loaded from here on, and the xdist workers

from pathlib import Path  # noqa: E402

import pytest
from hypothesis import HealthCheck, settings

import suite_db

if os.environ["OPENBLAS_NUM_THREADS"] == "1":  # the BLAS libraries loaded before this file (numpy's)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")

# Collects every run's results and writes reports/<run-id>/index.html (see reports/plugin.py).
pytest_plugins = ["reports.plugin"]

# Generation is structure-first and cheap; the only health check we relax is `too_slow` for the
# training properties, per test, where the *test body* (GD) is what is slow.
settings.register_profile("ci", max_examples=25, derandomize=True, deadline=None, print_blob=True)
# derandomize=False explicitly: with CI set in the environment Hypothesis's default is derandomized,
# and the stress run must stay random (the report gives the seed that replays it).
settings.register_profile("stress", max_examples=200, derandomize=False, deadline=None, print_blob=True)
settings.register_profile("deep", max_examples=2000, derandomize=False, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=5, derandomize=True, deadline=None, print_blob=True)
settings.register_profile("fuzz", max_examples=10_000, derandomize=False, deadline=None, print_blob=True)
# ATTN_SUITE_REDIS set: the random profiles get the pooled database (fuzz writes it, stress/deep read it).
for _name in suite_db.READERS + suite_db.WRITERS:
    try:
        _db = suite_db.profile_database(_name, Path(__file__).resolve().parent)
    except ValueError as _exc:  # a malformed URL: one line, not a traceback
        raise pytest.UsageError(str(_exc)) from None
    if _db is not None:
        settings.register_profile(_name, settings.get_profile(_name), database=_db)
settings.load_profile("ci")


# Hypothesis biases its draws toward the literal constants of every local module in ``sys.modules`` at the
# moment of each draw (hypothesis.internal.conjecture.providers._get_local_constants).  Many of ours are
# imported lazily, inside a test, and a one-test replay collects one test module: so a test's examples
# depended on what had run before it in its worker, and a full run's failure did not replay from its seed
# (stress seed 3993101603; measured: test_theorem2's path property drew other examples from its 5th on
# when test_theorem1 ran first).  Every module of the project is imported before the first draw (~2 s).
_PACKAGES = ("theory", "strategies", "properties", "reports", "suite_db")


def _import_project_modules() -> None:
    import importlib
    import pkgutil

    for name in _PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(getattr(package, "__path__", []), name + "."):
            if not info.name.endswith("__main__"):  # a __main__ runs its command line on import
                importlib.import_module(info.name)


def pytest_sessionstart(session):
    _import_project_modules()


# numba compiles each kernel once per process unless its on-disk cache has it (cache=True).  On a clean clone both
# xdist workers compiled every kernel side by side (engine.warm_up alone ~39 s, the factor engine and the
# continuation's kernels ~40 s more, mostly type inference): measured, the clean-clone CI run took 930 s of pytest
# where a warm cache gave ~800 s.  The controller fills the cache first, in two processes at once (~40 s); the
# workers then load the kernels.  A warm cache makes this a second of imports.
_KERNELS = (
    "from theory.li2024.engine import warm_up; warm_up()",
    "from theory.li2024.factor_engine import warm_up; warm_up()\n"
    "from theory.core.problem import Problem\n"
    "from theory.li2024.continuation import continue_flow\n"
    "from theory.li2024.losses import safe_step\n"
    "from theory.li2024.training import train\n"
    "for f in ('examples/section5_counterexample.json', 'examples/li_cyclic_trial0.json'):\n"
    "    p = Problem.load(f)\n"
    "    continue_flow(p, train(p, 200, safe_step(p), engine='numpy'), 20000)\n",
)


def _fill_kernel_cache(config) -> None:
    import subprocess
    import sys
    import time

    t0 = time.perf_counter()
    print("compiling the numba kernels once for the workers (a second when cached) ...", file=sys.stderr, flush=True)
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=config.rootpath, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for code in _KERNELS]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode:  # not fatal: the workers compile what is missing, as before
            print(f"note: a kernel warm-up failed (the workers will compile): {err.strip()[-300:]}", file=sys.stderr)
    print(f"kernels ready in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


def pytest_configure(config):
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput") \
            and not config.option.collectonly:
        _fill_kernel_cache(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's ``worksteal`` schedule unless the command names one (``--dist``): a worker that runs out takes
    half of the other's queue, so a run no longer ends on a long test left on one worker while the other idles
    (the default "load" schedule, measured: 729 s and 814 s of tests on the two workers, 835 s of wall time;
    worksteal: 797 s).  Not in pyproject's addopts: ``--dist`` there is a usage error under ``-p no:xdist``,
    which the report's replay commands use."""
    if any(a in ("--dist", "-d") or a.startswith("--dist=") for a in config.invocation_params.args):
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """Heavy properties (``@pytest.mark.heavy``: minutes each under ``deep``) start first, dealt to the xdist
    workers' first blocks with their seconds balanced; then tests marked ``slow`` (tens of seconds each),
    then the rest in collected order (:func:`properties.schedule.deal`).  Under xdist's ``worksteal``
    schedule (:func:`pytest_xdist_make_scheduler`) an idle worker takes half of the other's queue from its
    end, so a run ends on short tests and the two workers finish together; a slow test last on one worker
    kept the other idle for its whole length (measured: 712 s and 775 s of tests on the two workers, 797 s of
    wall time, the last ones the two Scan and Snap real-text properties, 48 s and 44 s).  Each worker
    collects and sorts the same way, as xdist requires; draws do not depend on the order
    (_import_project_modules)."""
    from properties.schedule import deal, heavy_seconds

    workerinput = getattr(config, "workerinput", None)
    workers = int(workerinput["workercount"]) if workerinput is not None else 1
    try:
        items[:] = deal(items, workers=workers, seconds=heavy_seconds,
                        slow=lambda item: item.get_closest_marker("slow") is not None)
    except ValueError as exc:  # a malformed marker: one line, not a traceback
        raise pytest.UsageError(str(exc)) from None
