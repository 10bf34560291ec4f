"""What the benchmarks share: this machine's matmul throughput, counted FLOPs, dropout-mask cost."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from corelib.engine import DropoutStreams
from corelib.models import TransformerConfig


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


class _FlopCount(TorchDispatchMode):
    """Adds up the FLOPs of every dispatched operation that torch's flop registry knows (matmuls,
    convolutions, attention kernels). Unlike FlopCounterMode it tracks no modules, whose hooks
    fail on some no-grad forwards."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        count = flop_registry.get(func._overloadpacket)
        if count is not None:
            self.total += count(*args, **kwargs, out_val=out)
        return out


def counted_flops(work: Callable[[], object]) -> float:
    """FLOPs of the matmuls (and the like) that ``work()`` runs, counted as they are dispatched.

    Counted on the operations actually run (under ``vmap`` too), so a benchmark reports the work
    each side really does rather than a formula's estimate. Run it apart from the timed runs:
    counting slows the work down.
    """
    with _FlopCount() as counter:
        work()
    return float(counter.total)


def mask_seconds(
    model_cfg: TransformerConfig, seeds: list[int], batches: list[int], length: int, repeats: int = 3
) -> float:
    """Seconds to draw the dropout masks of one pass over ``batches`` for all ``seeds``, best of ``repeats``.

    The masks are drawn as ``nn.Dropout`` draws them (whole, with ``bernoulli_`` on the CPU), which
    is what both the plain loop and the engine pay for every training step.
    """
    best = float("inf")
    for _ in range(repeats):
        streams = DropoutStreams(model_cfg.dropout, seeds)
        t0 = time.perf_counter()
        for batch in batches:
            streams.draw(model_cfg, batch, length, "cpu")
        best = min(best, time.perf_counter() - t0)
    return best
