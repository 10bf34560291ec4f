"""Seed-steps per second of the grokking sweeps: 12 seeds together vs the authors' loop, one seed at a time.

Every side trains the sweeps' model (one post-norm block, d_model 128, p = 53, split seed 42,
batch 512, AdamW lr 1e-3, weight decay 1, dropout 0.1 unless ``--dropout``; model seeds 42 + s)
and knows the training and test accuracy after *every* step. Minibatches follow the reference: a
fresh permutation whenever the next batch would run past the end (two batches of 512 per
permutation at p = 53, the last 380 examples skipped).

- **The authors' loop**, written here to do what their reference code does: one seed at a time,
  PyTorch's ``nn.TransformerEncoderLayer`` (:func:`_machine.reference_model`, given a causal mask
  because our model is causal, so both compute the same function), loss at the last position of
  a full forward, ``torch.optim.AdamW``, then in eval mode (the layer's fused inference path) the
  accuracy on the whole training set and on the whole test set.
- **The in-house loop**: the same loop around our :class:`corelib.models.Transformer`. It replaces
  the earlier plain loop, which differed from it only in its batch order (every epoch's partial
  batch kept); the engine's target over it stays >= 10x. Its gap to the authors' loop is what
  our model costs outside the engine.
- **The sweep engine** (:func:`corelib.tasks.sweeps.train_condition`): seeds in one vectorised model,
  last position only, exact early-exit accuracy checks. Both loops and the engine start from
  fresh models, so the steps measured are the early phase of training. The engine's fixed cost
  per condition is removed by differencing a 1-step and a ``--steps`` run, and printed apart.

Where the engine's step went, and what changed it (2 threads, AMD EPYC with AVX512-BF16,
2026-11-27; none of the changes moves a number: the book's sweeps chapter wrote byte-identical
records before and after them, in 365 s and 287 s):
about 105 ms per step of 12 seeds before, of which 10.5 ms drew the dropout masks, 10-13 ms ran
the two accuracy checks and up to 10 ms (kernel time) faulted in fresh pages for the step's
large tensors. The masks now come from one compiled loop (1.3 ms), both checks' first chunks
from one forward pass (3.6 ms less per step, in alternating runs), and freed memory stays in the
heap for the next step (:mod:`corelib.cpu_memory`): about 85 ms per step. Of what is left, the
forward pass's linear layers take about 29 ms and the backward pass about 50 ms (cProfile), their
products at about 60 % of the rate the same products reach alone, in a loop that keeps their
operands in cache.

Each side's FLOPs are counted on the operations it dispatches and compared with this machine's
fp32 matmul peak; with the time of the dropout masks this gives the engine's ceiling, the most
any tuning of its method could reach here. Run from the project root::

    python benchmarks/sweep_throughput.py              # 40 steps per side
    python benchmarks/sweep_throughput.py --steps 10   # quicker
    python benchmarks/sweep_throughput.py --dropout 0  # without dropout
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _machine import (  # noqa: E402
    ENGINE_SIDES,
    NATIVE_BF16,
    NO_BF16,
    counted_flops,
    mask_seconds,
    matmul_gflops,
    print_sides,
    reference_model,
    same_allocator_for_every_side,
)
from corelib.models import DEVICE_VARIABLE, Transformer  # noqa: E402
from corelib.tasks.modular import modular_addition_split  # noqa: E402
from corelib.tasks.sweeps import Condition, SweepConfig, SweepStats, condition_data, train_condition  # noqa: E402


def authors_loop(
    build: Callable[[], nn.Module], cfg: SweepConfig, cond: Condition, seeds: list[int], steps: int
) -> float:
    """Seed-steps per second of the authors' loop: ``steps`` steps of each seed, full evaluations after each.

    ``build()`` makes the model after ``torch.manual_seed(seed)``.
    """
    (x, y), (xt, yt) = modular_addition_split(cond.p, cfg.train_fraction, cfg.split_seed, cfg.split_permutation)
    n, batch = len(x), cond.batch_size
    t0 = time.perf_counter()
    for seed in seeds:
        torch.manual_seed(seed)
        model = build()
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cond.weight_decay)
        order, start = torch.randperm(n), 0
        for _ in range(steps):
            if start + batch > n:
                order, start = torch.randperm(n), 0
            idx = order[start : start + batch]
            start += batch
            model.train()  # dropout on for the step, off for the accuracies
            loss = F.cross_entropy(model(x[idx])[:, -1], y[idx, -1])
            opt.zero_grad()
            loss.backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                train_acc = (model(x)[:, -1].argmax(-1) == y[:, -1]).float().mean().item()
                test_acc = (model(xt)[:, -1].argmax(-1) == yt[:, -1]).float().mean().item()
            del train_acc, test_acc
    return len(seeds) * steps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="optimizer steps per side")
    ap.add_argument("--seeds", type=int, default=12, help="seeds trained together by the sweep engine")
    ap.add_argument("--plain-seeds", type=int, default=2, help="seeds trained one by one by each loop")
    ap.add_argument("--dropout", type=float, default=SweepConfig.dropout, help="dropout during training")
    args = ap.parse_args()
    if args.steps < 2:
        ap.error(f"--steps must be at least 2 (the cost of the steps is a difference of two runs), got {args.steps}")
    cfg, cond = SweepConfig(dropout=args.dropout), Condition(p=53, weight_decay=1.0, batch_size=512)
    seeds = [42 + s for s in range(args.seeds)]
    allocator = same_allocator_for_every_side()
    peak = matmul_gflops()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, p = {cond.p}, batch "
        f"{cond.batch_size}, dropout {cfg.dropout:g}, {args.steps} steps; fp32 matmul peak measured: "
        f"{peak:.1f} GFLOP/s; {allocator}"
    )

    model_cfg = cfg.model_config(cond.p)
    loops = {
        "authors": lambda: reference_model(cond.p, cfg.n_layers, cfg.dropout),
        "in-house": lambda: Transformer(model_cfg),
    }
    # The work of a loop's seed-step, counted on the operations it dispatches (apart from the
    # timed runs; counting first also spares the timed runs a first call's set-up).
    flops = {
        name: counted_flops(lambda b=build: authors_loop(b, cfg, cond, seeds[:1], 1)) for name, build in loops.items()
    }
    rates = {
        name: authors_loop(build, cfg, cond, seeds[: args.plain_seeds], args.steps) for name, build in loops.items()
    }

    def run(steps: int, stats: SweepStats | None = None, precision: str = "fp32") -> None:
        run_cfg = replace(cfg, precision=precision)
        train_condition(cond, seeds, run_cfg, max_steps=steps, device="cpu", progress=False, stats=stats)

    def timed(steps: int, precision: str) -> tuple[float, SweepStats]:
        stats = SweepStats()
        t0 = time.perf_counter()
        run(steps, stats, precision)
        return time.perf_counter() - t0, stats

    # Fixed costs (initialising the models, the full accuracy of every seed when it stops) are
    # paid once per condition; a difference of two runs measures the cost of the steps alone.
    for name, precision in ENGINE_SIDES:
        run(1, None, precision)  # warm-up: a first call's set-up would be charged to the 1-step run
        t_short, short = timed(1, precision)
        t_long, long_ = timed(args.steps, precision)
        seed_steps = long_.seed_steps - short.seed_steps
        if t_long <= t_short:
            sys.exit(f"the {args.steps}-step run was no slower than the 1-step run: time more --steps.")
        rates[name] = seed_steps / (t_long - t_short)
        if name == "engine":
            eval_per_seed_step = (long_.eval_rows - short.eval_rows) / seed_steps
    print(f"sweep engine fixed cost per condition: {t_short:.2f} s (one step included)")

    # The engine's work per seed-step, counted as a difference too, and its dropout masks (the
    # loops' nn.Dropout layers draw their own inside the timed runs).
    n_count = min(args.steps, 5)
    flops["engine"] = flops["engine bf16"] = (counted_flops(lambda: run(n_count)) - counted_flops(lambda: run(1))) / (
        (n_count - 1) * len(seeds)
    )
    length = condition_data(cond, cfg)[0].prefixes.shape[1] + 1
    masks = mask_seconds(model_cfg, seeds, [cond.batch_size], length) / len(seeds) if cfg.dropout else 0.0
    labels = {
        "authors": "authors' loop (torch encoder layers), one seed at a time, full evaluation",
        "in-house": "in-house loop (our Transformer), one seed at a time, full evaluation",
        "engine": f"sweep engine, {args.seeds} seeds together, early exit",
        "engine bf16": f"sweep engine, {args.seeds} seeds together, early exit, bf16 training",
    }
    labels = {k: v for k, v in labels.items() if k in rates}
    gflops = print_sides(labels, rates, flops, peak, "seed-step")
    print(f"the engine evaluated {eval_per_seed_step:.0f} rows per seed-step")
    for name, label, target in (("authors", "the authors' loop", 4.5), ("in-house", "the in-house loop", 10)):
        print(
            f"speed-up over {label}: {rates['engine'] / rates[name]:.1f}x  (target >= {target}x); GFLOP/s: "
            f"engine {gflops['engine']:.1f} ({gflops['engine'] / peak:.0%} of peak), {label[4:]} "
            f"{gflops[name]:.1f} ({gflops[name] / peak:.0%} of peak)"
        )
    if NATIVE_BF16:
        print(
            f"bf16: {rates['engine bf16'] / rates['engine']:.2f}x the engine's fp32 rate (adopted where >= 1.3x); "
            f"{rates['engine bf16'] / rates['authors']:.1f}x the authors' loop (target >= 10x)"
        )
    else:
        print(NO_BF16)
    # What no tuning of the engine's method can beat here: its counted fp32 FLOPs at the full
    # matmul peak, plus the masks.
    ceiling = 1 / (flops["engine"] / peak / 1e9 + masks)
    print(
        f"dropout masks: {masks * 1e3:.1f} ms per seed-step; the engine's ceiling here (its matmuls at 100% "
        f"of the peak, plus the masks): {ceiling:.1f} seed-steps/s, a speed-up of at most "
        f"{ceiling / rates['authors']:.1f}x over the authors' loop ({ceiling / rates['in-house']:.1f}x over "
        "the in-house loop)"
    )


if __name__ == "__main__":
    os.environ[DEVICE_VARIABLE] = "cpu"  # every side on the CPU, measured against its matmul peak
    main()
