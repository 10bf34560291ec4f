"""What the benchmarks share: this machine's matmul throughput, counted FLOPs, dropout-mask cost, and
the authors' toy model (PyTorch's encoder layers) that the authors'-loop baselines train."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from corelib.cpu_memory import retain_freed_memory
from corelib.engine import DropoutStreams, bf16_native
from corelib.models import TransformerConfig

NATIVE_BF16 = bf16_native("cpu")
"""Whether this CPU computes bf16 matmuls in hardware; elsewhere the engine refuses bf16."""
ENGINE_SIDES = (("engine", "fp32"), ("engine bf16", "bf16")) if NATIVE_BF16 else (("engine", "fp32"),)
"""The engine's timed sides: its fp32 run, and its bf16 run where the CPU computes bf16 natively."""
NO_BF16 = "bf16: not timed: this CPU would emulate it, and the engine refuses bf16 there (corelib.engine.bf16_native)"


def same_allocator_for_every_side() -> str:
    """Apply the engine's malloc settings (:mod:`corelib.cpu_memory`) before any side runs.

    The engine applies them when it starts training, and they hold for the rest of the process;
    applied first, every side is timed under them, so no ratio credits the engine with a setting
    any loop could use. Returns a line for the benchmark's header.
    """
    if retain_freed_memory():
        return "freed memory kept for reuse (corelib.cpu_memory) for every side"
    return "malloc left at its defaults for every side"


def matmul_gflops(n: int = 2048, repeats: int = 5, dtype: torch.dtype = torch.float32) -> float:
    """Measured matmul throughput of this machine in ``dtype`` (best of ``repeats`` n x n products)."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9


_aten = torch.ops.aten
# The CPU variants of the fused attention kernel (which nn.MultiheadAttention runs without dropout)
# are missing from torch's registry; they do the work of the generic kernel and count as it does.
_UNREGISTERED = {
    _aten._scaled_dot_product_flash_attention_for_cpu: flop_registry[_aten._scaled_dot_product_flash_attention],
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: flop_registry[
        _aten._scaled_dot_product_flash_attention_backward
    ],
}


class _FlopCount(TorchDispatchMode):
    """Adds up the FLOPs of every dispatched operation that torch's flop registry knows (matmuls,
    convolutions, attention kernels, and the CPU attention kernels it misses). Unlike
    FlopCounterMode it tracks no modules, whose hooks fail on some no-grad forwards."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        count = flop_registry.get(func._overloadpacket) or _UNREGISTERED.get(func._overloadpacket)
        if count is not None:
            self.total += count(*args, **kwargs, out_val=out)
        return out


def counted_flops(work: Callable[[], object]) -> float:
    """FLOPs of the matmuls (and the like) that ``work()`` runs, counted as they are dispatched.

    Counted on the operations actually run (under ``vmap`` too), so a benchmark reports the work
    each side really does rather than a formula's estimate. Run it apart from the timed runs:
    counting slows the work down. PyTorch's fused inference kernel for its encoder layer runs its
    matmuls out of the dispatcher's sight, so it is switched off while counting: the layer then
    dispatches the same matmuls one by one.
    """
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with _FlopCount() as counter:
            work()
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
    return float(counter.total)


def mask_seconds(
    model_cfg: TransformerConfig, seeds: list[int], batches: list[int], length: int, repeats: int = 3
) -> float:
    """Seconds to draw the dropout masks of one pass over ``batches`` for all ``seeds``, best of ``repeats``.

    The engine's masks (:class:`corelib.masks.DropoutStreams`, only the elements its
    last-position passes use), which it pays for every training step.
    """
    best = float("inf")
    for _ in range(repeats):
        streams = DropoutStreams(model_cfg.dropout, seeds)
        t0 = time.perf_counter()
        for batch in batches:
            streams.draw(model_cfg, batch, length, "cpu")
        best = min(best, time.perf_counter() - t0)
    return best


class ReferenceModel(nn.Module):
    """The authors' toy model: token and position (64 rows) embeddings summed, PyTorch encoder layers.

    Each block is ``nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=d_ff,
    batch_first=True)`` with its defaults (post-norm, ReLU, dropout 0.1 unless given, torch's
    initialisation), then an ``nn.Linear`` read-out. Built in the authors' order, so one seed
    draws the same initial weights as :class:`corelib.models.Transformer`. The layers get a causal
    ``src_mask`` because our model is causal: both sides then compute the same function.

    Which kernels run (torch 2.13, CPU): in eval mode without grad, the layer's fused inference
    kernel; in training, scaled-dot-product attention, whose flash kernel is taken only without
    dropout (with attention dropout it falls back to unfused batched matmuls).
    """

    def __init__(
        self, vocab: int, n_layers: int, d_model: int = 128, n_heads: int = 4, d_ff: int = 512, dropout: float = 0.1
    ) -> None:
        super().__init__()
        self.token_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(64, d_model)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=d_ff, dropout=dropout, batch_first=True)
            for _ in range(n_layers)
        )
        self.lm_head = nn.Linear(d_model, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (batch, pos, vocab) for tokens (batch, pos)."""
        t = x.shape[1]
        h = self.token_emb(x) + self.pos_emb(torch.arange(t, device=x.device))
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        for layer in self.layers:
            h = layer(h, src_mask=causal)
        return self.lm_head(h)


def reference_model(vocab: int, n_layers: int, dropout: float = 0.1) -> ReferenceModel:
    """The authors' model for a toy task: d_model 128, 4 heads, MLP 512 (see :class:`ReferenceModel`)."""
    return ReferenceModel(vocab, n_layers, dropout=dropout)


def print_sides(
    labels: dict[str, str], rates: dict[str, float], flops: dict[str, float], peak: float, unit: str
) -> dict:
    """One aligned line per side: its rate in ``unit``/s, FLOPs per ``unit``, GFLOP/s and share of ``peak``.

    Returns each side's GFLOP/s.
    """
    gflops = {name: rates[name] * flops[name] / 1e9 for name in labels}
    width = max(map(len, labels.values()))
    for name, label in labels.items():
        print(
            f"{label:<{width}}: {rates[name]:8.2f} {unit}s/s, {flops[name] / 1e9:5.2f} GFLOP per {unit}, "
            f"{gflops[name]:6.1f} GFLOP/s ({gflops[name] / peak:.0%} of the measured {peak:.1f} GFLOP/s matmul peak)"
        )
    return gflops
