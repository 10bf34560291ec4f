"""Memory and time of ACE: streaming moments versus stacking per-sample Gram matrices.

ACE needs two D x D moments (activation covariance, mean of J^T J). ``corelib.ace.MomentAccumulator``
adds each batch into two float64 D x D sums, O(D^2 + batch x D) memory for any number of samples;
the naive route keeps one D x D matrix per sample and sums them afterwards, O((N + M) D^2).

Each configuration runs in a fresh subprocess, so its peak memory is its own; the table shows the
``tracemalloc`` peak and the growth of the resident set's high-water mark (``VmHWM``, reset via
``/proc/self/clear_refs`` where allowed, else ``ru_maxrss``). The data are synthetic: a rank-16
signal plus noise, generated per batch from per-batch seeds, and a read-out
``f(h) = W2 tanh(W1 h)`` whose Jacobians are computed in closed form at M rows. Nothing is
asserted about time. Usage::

    python benchmarks/ace_memory.py            # D = 1024, N up to 200 000, M = 1024, K = 8
    python benchmarks/ace_memory.py --quick    # small sizes
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np

SIGNAL_RANK = 16
HIDDEN = 64  # width of the read-out's hidden layer


# --------------------------------------------------------------------------- synthetic data


class Problem:
    """Deterministic synthetic activations (streamed by batch) and read-out Jacobians."""

    def __init__(self, d: int, k: int, seed: int):
        rng = np.random.default_rng(seed)
        self.d, self.k, self.seed = d, k, seed
        self.mix = rng.standard_normal((SIGNAL_RANK, d)) / np.sqrt(SIGNAL_RANK)
        self.w1 = rng.standard_normal((HIDDEN, d)) / np.sqrt(d)
        self.w2 = rng.standard_normal((k, HIDDEN)) / np.sqrt(HIDDEN)

    def batches(self, n: int, batch: int):
        """Yield (start, activations) for rows [start, start + batch) of an N-row stream."""
        for b, start in enumerate(range(0, n, batch)):
            rows = min(batch, n - start)
            rng = np.random.default_rng([self.seed, b])
            h = rng.standard_normal((rows, SIGNAL_RANK)) @ self.mix
            h += 0.1 * rng.standard_normal((rows, self.d))
            yield start, h

    def jacobians(self, h: np.ndarray) -> np.ndarray:
        """(m, K, D) Jacobians of W2 tanh(W1 h) at the rows of h."""
        gate = 1.0 - np.tanh(h @ self.w1.T) ** 2  # (m, HIDDEN)
        return np.einsum("kj,mj,jd->mkd", self.w2, gate, self.w1, optimize=True)


def jacobian_rows(n: int, m: int) -> np.ndarray:
    """Indices of the M rows (evenly spread over the N-row stream) where Jacobians are taken."""
    return np.unique(np.linspace(0, n - 1, m).round().astype(np.int64))


# --------------------------------------------------------------------------- the two routes


def streamed_core(problem: Problem, n: int, m: int, batch: int, rank: int):
    from corelib.ace import MomentAccumulator

    rows = jacobian_rows(n, m)
    acc = MomentAccumulator(problem.d)
    for start, h in problem.batches(n, batch):
        sel = rows[(rows >= start) & (rows < start + len(h))] - start
        acc.update(h_batch=h, j_batch=problem.jacobians(h[sel]) if len(sel) else None)
    return acc.core(rank=rank)


def naive_core(problem: Problem, n: int, m: int, batch: int, rank: int):
    """Stack every per-sample Gram matrix, then sum: what the accumulator avoids."""
    from corelib.ace import from_moments

    rows = jacobian_rows(n, m)
    h = np.concatenate([x for _, x in problem.batches(n, batch)])
    mean = h.mean(axis=0)
    hc = h - mean
    outer = np.einsum("ni,nj->nij", hc, hc)  # (N, D, D): h_i h_i^T for every sample
    jac = problem.jacobians(h[rows])
    jtj = np.einsum("mki,mkj->mij", jac, jac)  # (M, D, D): J_i^T J_i for every Jacobian
    activity = outer.sum(axis=0) / (n - 1)
    relevance = jtj.mean(axis=0)
    return from_moments(activity, relevance, rank=rank, mean=mean)


# --------------------------------------------------------------------------- measurement


def _rss_kb() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def _hwm_kb(reset_ok: bool) -> int:
    if reset_ok:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB on Linux


def worker(route: str, n: int, m: int, d: int, k: int, batch: int, seed: int, rank: int) -> dict:
    """Run one route once in this process and return its measurements."""
    import corelib.ace  # noqa: F401 -- import (torch etc.) before the baseline is taken

    problem = Problem(d, k, seed)
    fn = {"stream": streamed_core, "naive": naive_core}[route]
    baseline = _rss_kb()
    reset_ok = _reset_hwm()
    tracemalloc.start()
    t0 = time.perf_counter()
    core = fn(problem, n, m, batch, rank)
    seconds = time.perf_counter() - t0
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    hwm = _hwm_kb(reset_ok)
    out = {
        "route": route,
        "n": n,
        "m": len(jacobian_rows(n, m)),
        "d": d,
        "k": k,
        "seconds": seconds,
        "traced_mb": traced_peak / 2**20,
        "rss_mb": max(hwm - baseline, 0) / 1024,
        "hwm_reset": reset_ok,
        "sv": core.singular_values[:rank].tolist(),
    }
    if route == "naive":  # agreement check on identical data, outside the measured region
        ref = streamed_core(problem, n, m, batch, rank)
        out["max_rel_sv_diff"] = float(
            np.max(np.abs(core.singular_values[:rank] - ref.singular_values[:rank]) / ref.singular_values[:rank])
        )
        from corelib.compare import principal_angles

        out["max_angle_deg"] = float(np.max(principal_angles(core.basis, ref.basis)))
    return out


def run(route: str, n: int, m: int, args) -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        route,
        str(n),
        str(m),
        "--d",
        str(args.d),
        "--k",
        str(args.k),
        "--batch",
        str(args.batch),
        "--seed",
        str(args.seed),
        "--rank",
        str(args.rank),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"worker failed ({' '.join(cmd[2:])}):\n{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- driver


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (D=256), a few seconds")
    p.add_argument("--d", type=int, default=None, help="activation dimension D (default 1024)")
    p.add_argument("--k", type=int, default=8, help="read-out outputs K per Jacobian")
    p.add_argument("--m", type=int, default=None, help="Jacobians for the streamed route (1024)")
    p.add_argument("--batch", type=int, default=4096, help="rows per streamed batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rank", type=int, default=16, help="core rank compared between routes")
    p.add_argument("--worker", nargs=3, metavar=("ROUTE", "N", "M"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.d is None:
        args.d = 256 if args.quick else 1024
    if args.worker:
        route, n, m = args.worker[0], int(args.worker[1]), int(args.worker[2])
        print(json.dumps(worker(route, n, m, args.d, args.k, args.batch, args.seed, args.rank)))
        return 0

    if args.quick:
        stream_ns, naive_ns, m_full = [5_000, 10_000, 20_000], [16, 32, 64], args.m or 128
    else:
        stream_ns, naive_ns, m_full = [25_000, 50_000, 100_000, 200_000], [64, 128, 256], args.m or 1024
    d, k = args.d, args.k
    gram_mb = d * d * 8 / 2**20
    print(f"ACE memory benchmark: D = {d}, K = {k}, batch = {args.batch}, one D x D float64 matrix = {gram_mb:.2f} MB")
    print(f"machine: {os.cpu_count()} CPUs, numpy {np.__version__}\n")

    header = f"{'route':<8}{'N':>9}{'M':>7}{'time s':>9}{'tracemalloc MB':>16}{'RSS MB':>9}{'MB per 1k rows':>16}"
    print(header)
    print("-" * len(header))
    results = []
    for route, ns, mfn in (("stream", stream_ns, lambda n: m_full), ("naive", naive_ns, lambda n: n)):
        for n in ns:
            r = run(route, n, mfn(n), args)
            results.append(r)
            per_k = r["traced_mb"] / (r["n"] + r["m"]) * 1000
            print(
                f"{route:<8}{r['n']:>9,}{r['m']:>7,}{r['seconds']:>9.2f}{r['traced_mb']:>16.1f}"
                f"{r['rss_mb']:>9.1f}{per_k:>16.1f}",
                flush=True,
            )
    if not results[0]["hwm_reset"]:
        print("(VmHWM could not be reset; RSS column uses ru_maxrss growth)")

    stream = [r for r in results if r["route"] == "stream"]
    naive = [r for r in results if r["route"] == "naive"]
    big, small = stream[-1], stream[0]
    # Naive memory is linear in the number of stacked matrices: fit MB per matrix.
    counts = np.array([r["n"] + r["m"] for r in naive], dtype=float)
    mb = np.array([r["traced_mb"] for r in naive])
    slope = float(np.polyfit(counts, mb, 1)[0])
    naive_at_big = slope * (big["n"] + big["m"])
    print("\nSummary (measured in this run):")
    print(
        f"  streamed: N x {big['n'] / small['n']:.0f} ({small['n']:,} -> {big['n']:,}) changes peak "
        f"tracemalloc by x {big['traced_mb'] / small['traced_mb']:.2f} and time by "
        f"x {big['seconds'] / small['seconds']:.2f}"
    )
    print(
        f"  naive: {slope:.2f} MB per stacked sample (one D x D matrix is {gram_mb:.2f} MB); "
        f"N x {naive[-1]['n'] / naive[0]['n']:.0f} changes peak by "
        f"x {naive[-1]['traced_mb'] / naive[0]['traced_mb']:.2f}"
    )
    print(
        f"  naive extrapolated to N = {big['n']:,}, M = {big['m']:,}: {naive_at_big / 2**20:.2f} TB "
        f"(x {naive_at_big / big['traced_mb']:,.0f} the streamed peak of {big['traced_mb']:.0f} MB)"
    )
    print(
        f"  at N = {naive[-1]['n']}, the naive route needs x "
        f"{naive[-1]['traced_mb'] / big['traced_mb']:.1f} the memory the streamed route needs "
        f"for N = {big['n']:,}"
    )
    # Agreement at the largest naive size (smaller ones may have fewer samples than the rank).
    last = naive[-1]
    print(
        f"  agreement on identical data (N = {last['n']}): top-{args.rank} singular values within "
        f"{last['max_rel_sv_diff']:.1e} (relative), cores within {last['max_angle_deg']:.1e} degrees"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
