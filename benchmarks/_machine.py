"""What the benchmarks share: this machine's measured fp32 matmul throughput."""
from __future__ import annotations

import time

import torch


def matmul_gflops(n: int = 2048, repeats: int = 5) -> float:
    """Measured fp32 matmul throughput of this machine (best of ``repeats`` n x n products)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9
