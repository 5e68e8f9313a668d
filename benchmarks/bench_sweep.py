"""Runs per second of ``python -m theory sweep`` in-process vs ``--workers 2`` (a Dask LocalCluster of two
single-threaded worker processes), on the sweeps' default grids.  Wall time includes starting the cluster
and loading the kernels in each worker, i.e. what a user waits for.

    python benchmarks/bench_sweep.py [--sweeps theorem1-phase,section5-phase] [--seeds N]

Prints a markdown table; the latest one is in benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from theory.run import sweep  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweeps", default="theorem1-phase,section5-phase")
    ap.add_argument("--seeds", type=int, default=None)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sweeps.split(","):
            res = {}
            for mode, workers in (("in-process", None), ("--workers 2", 2)):
                out = Path(tmp) / f"{name}-{workers}.jsonl"
                s = sweep.execute(name, seeds=args.seeds, out=out, workers=workers, progress=False)
                res[mode] = s
                assert s["ran_now"] == s["runs"]
            a, b = res["in-process"], res["--workers 2"]
            same = sweep.read_records(Path(tmp) / f"{name}-None.jsonl")
            other = sweep.read_records(Path(tmp) / f"{name}-2.jsonl")
            key = lambda r: sweep.record_key(r["sweep"], r["params"], r["seed"])  # noqa: E731
            identical = {key(r): r for r in same} == {key(r): r for r in other}
            rows.append((name, a["runs"], a["seconds"], a["runs_per_second"], b["seconds"], b["runs_per_second"],
                         b["runs_per_second"] / a["runs_per_second"], identical, b["setup_seconds"],
                         b["runs_per_second_after_setup"] / a["runs_per_second_after_setup"]))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n")
    print(f"load average before: {os.getloadavg()[0]:.2f}\n")
    print("| sweep | runs | in-process s | in-process runs/s | --workers 2 s | --workers 2 runs/s | speed-up | "
          "cluster setup s | speed-up after setup | same records |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.2f} | {r[4]:.1f} | {r[5]:.2f} | {r[6]:.2f}x | {r[8]:.1f} | "
              f"{r[9]:.2f}x | {r[7]} |")


if __name__ == "__main__":
    main()
