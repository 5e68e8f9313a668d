"""GD steps per second: textbook W-space GD vs torch autograd vs the numpy and compiled token-space engines.

    .venv/bin/python benchmarks/bench_gd.py [--budget SECONDS] [--rounds R] [--horizon STEPS] [--markdown] [--settings 0,1,2]

The torch column needs the optional extra (``pip install -e .[bench]``: CPU torch 2.13.0); without torch
it prints "skipped".

Every number in the table comes from this one run.  Problems follow the paper's protocol (docs/theory.md,
"How the paper measures"): unit-norm Gaussian embeddings, T distinct tokens per sample, the label drawn
from the sample, -log loss with the default head, W(0) small random.  Each implementation repeats runs
of ``--horizon`` GD steps (default 2000, the paper's run length) from that W(0) until ``--budget``
seconds of CPU time are spent; the rate is steps / CPU seconds of this process (robust to other load on
the machine; one thread: torch is set to one thread, numpy's BLAS calls are tiny here).  The budget is
spent in ``--rounds`` rounds that take the implementations in turn, and each implementation's rate is its
best round: on a shared virtual machine a core's speed drifts by up to 1.6x within a minute (measured:
the same kernel at 0.47 and 0.78 us per step in consecutive runs), and a ratio of two rates measured a
few seconds apart carried that drift; interleaved, both sides of a ratio see the same machine.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.tables import print_table  # noqa: E402
from theory.li2024.engine import gd_compiled, warm_up  # noqa: E402
from theory.li2024.losses import TokenData  # noqa: E402
from theory.core.problem import Problem  # noqa: E402
from theory.li2024.training import gd_numpy  # noqa: E402

SETTINGS = [(6, 4, 6, 8), (64, 16, 20, 32), (256, 32, 50, 64)]  # (n, T, K, d); the first is the paper's
ETA = 0.1


def paper_problem(n, T, K, d, seed=0):
    rng = np.random.default_rng(seed)
    E = rng.normal(size=(K, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    seqs = [list(rng.choice(K, size=T, replace=False)) for _ in range(n)]
    labels = [int(rng.choice(s)) for s in seqs]
    W0 = 0.01 * rng.normal(size=(d, d))
    return Problem.create(E, seqs, labels, "log"), W0


# ------------------------------------------------------------------------------------------------
# Textbook: per-sample T x d matrices, softmax over positions, analytic gradient in W (batched over
# samples the way the papers' code batches them).
# ------------------------------------------------------------------------------------------------
def textbook_gd(problem: Problem, W0, eta, steps, normalized):
    X = problem.E[np.array(problem.sequences)]  # n x T x d
    q = X[:, -1, :]  # n x d
    c = problem.C[problem.label_array]  # n x d
    n = problem.n
    W = W0.copy()
    for _ in range(steps):
        s = np.einsum("ntd,nd->nt", X, q @ W.T)  # x_t^T W x_last
        a = np.exp(s - s.max(axis=1, keepdims=True))
        a /= a.sum(axis=1, keepdims=True)
        f = np.einsum("nt,ntd->nd", a, X)
        u = np.einsum("nd,nd->n", c, f)
        v = -c / u[:, None]  # d(-log u)/df
        g = np.einsum("ntd,nd->nt", X, v)
        ds = a * (g - (a * g).sum(axis=1, keepdims=True))
        grad = np.einsum("nt,ntd->nd", ds, X).T @ q / n  # sum_i X_i^T ds_i x_last^T
        step = eta
        if normalized:
            gn = np.linalg.norm(grad)
            step = eta / gn if gn > 0 else 0.0
        W -= step * grad
    return W


def torch_gd(problem: Problem, W0, eta, steps, normalized):
    import torch

    X = torch.tensor(problem.E[np.array(problem.sequences)])
    q = X[:, -1, :]
    c = torch.tensor(problem.C[problem.label_array])
    W = torch.tensor(W0, requires_grad=True)
    for _ in range(steps):
        s = torch.einsum("ntd,nd->nt", X, q @ W.T)
        a = torch.softmax(s, dim=1)
        u = torch.einsum("nd,nd->n", c, torch.einsum("nt,ntd->nd", a, X))
        loss = -torch.log(u).mean()
        (grad,) = torch.autograd.grad(loss, W)
        with torch.no_grad():
            step = eta
            if normalized:
                gn = torch.linalg.norm(grad)
                step = eta / gn if gn > 0 else 0.0
            W -= step * grad
    return W.detach().numpy()


def numpy_engine(problem, W0, eta, steps, normalized):
    data = TokenData.from_problem(problem)
    E = problem.E
    return gd_numpy(E @ W0 @ E.T, data, problem.gram, eta, [steps], normalized)


def compiled_engine(problem, W0, eta, steps, normalized):
    data = TokenData.from_problem(problem)  # included: the end-to-end cost of one call
    E = problem.E
    return gd_compiled(E @ W0 @ E.T, data, problem.gram, eta, [steps], normalized)


def rate(fn, problem, W0, steps, normalized, budget):
    """Steps per CPU second over repeated runs of ``steps`` steps (at least one run)."""
    done, t0 = 0, time.process_time()
    while True:
        fn(problem, W0, ETA, steps, normalized)
        done += steps
        spent = time.process_time() - t0
        if spent >= budget:
            return done / spent


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=2.0, help="CPU seconds per (implementation, setting)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the best round counts")
    ap.add_argument("--horizon", type=int, default=2000, help="GD steps per run")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--settings", default=",".join(str(i) for i in range(len(SETTINGS))),
                    help=f"comma-separated indices into {SETTINGS}")
    args = ap.parse_args(argv)
    try:
        import torch

        torch.set_num_threads(1)
        torch.set_default_dtype(torch.float64)
        have_torch = True
    except ImportError:
        have_torch = False
    warm_up()  # compile or load the cached kernels outside the timings
    impls = [("textbook", textbook_gd), ("torch", torch_gd if have_torch else None), ("numpy engine", numpy_engine),
             ("compiled", compiled_engine)]
    rows = []
    for n, T, K, d in [SETTINGS[int(i)] for i in args.settings.split(",")]:
        problem, W0 = paper_problem(n, T, K, d)
        for normalized in (False, True):
            # Sanity: the engines and the textbook agree on W(horizon) before anything is timed.
            E = problem.E
            h = min(args.horizon, 200)
            Wt = textbook_gd(problem, W0, ETA, h, normalized)
            B = compiled_engine(problem, W0, ETA, h, normalized)[0][-1]
            err = np.abs(Wt - (W0 - E.T @ B @ E)).max() / max(1.0, np.abs(Wt).max())
            assert err < 1e-9, f"engine and textbook disagree ({err:.2e}) at n={n} T={T} K={K} d={d}"
            if have_torch:
                err = np.abs(Wt - torch_gd(problem, W0, ETA, h, normalized)).max() / max(1.0, np.abs(Wt).max())
                assert err < 1e-9, f"torch and textbook disagree ({err:.2e}) at n={n} T={T} K={K} d={d}"
            r = {name: None if fn is None else 0.0 for name, fn in impls}
            for _ in range(max(1, args.rounds)):
                for name, fn in impls:
                    if fn is not None:
                        r[name] = max(r[name], rate(fn, problem, W0, args.horizon, normalized,
                                                    args.budget / max(1, args.rounds)))
            rows.append(((n, T, K, d), "normalized" if normalized else "plain", r))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    header = ["n, T, K, d", "GD", "textbook", "torch", "numpy engine", "compiled", "compiled / textbook",
              "compiled / torch", "compiled / numpy engine"]
    fmt = lambda x: "skipped" if x is None else f"{x:,.0f}"  # noqa: E731
    lines = []
    for (cfg, mode, r) in rows:
        lines.append([", ".join(map(str, cfg)), mode, fmt(r["textbook"]), fmt(r["torch"]), fmt(r["numpy engine"]),
                      fmt(r["compiled"]), f"{r['compiled'] / r['textbook']:,.0f}x",
                      "skipped" if r["torch"] is None else f"{r['compiled'] / r['torch']:,.0f}x",
                      f"{r['compiled'] / r['numpy engine']:,.0f}x"])
    print(f"GD steps per CPU second (runs of {args.horizon} steps, eta={ETA}, -log loss, default head; best of "
          f"{max(1, args.rounds)} interleaved rounds); "
          f"{platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"numpy {np.__version__}, load average {load:.1f}")
    if not have_torch:
        print("torch: not installed, column skipped (pip install -e .[bench] to include it)")
    else:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, float64, autograd")
    print_table(header, lines, args.markdown)


if __name__ == "__main__":
    main()
