"""Seed-steps per second of the grokking sweeps: 12 seeds together vs a plain loop, one seed at a time.

Both sides train the sweeps' model (one post-norm block, d_model 128, p = 53, batch 512, AdamW,
dropout 0.1 unless ``--dropout``) and know the training and test accuracy after *every* step:
the **sweep engine** (:func:`corelib.sweeps.train_condition`: seeds in one vectorised model,
last position only, exact early-exit accuracy checks) and a **plain loop** (one model, full
forward, ``torch.optim.AdamW``, then a full evaluation of both sets after every step). Both start
from fresh models, so the steps measured are the early phase of training. The engine's fixed cost
per condition is removed by differencing a 1-step and a ``--steps`` run, and printed apart.

Each side's FLOPs are counted on the operations it dispatches and compared with this machine's
fp32 matmul peak; with the time of the dropout masks this gives the engine's ceiling, the most
any tuning of its method could reach here. Run from the project root::

    python benchmarks/sweep_throughput.py              # 40 steps per side
    python benchmarks/sweep_throughput.py --steps 10   # quicker
    python benchmarks/sweep_throughput.py --dropout 0  # without dropout
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _machine import counted_flops, mask_seconds, matmul_gflops  # noqa: E402
from corelib.engine import epoch_order  # noqa: E402
from corelib.models import Transformer  # noqa: E402
from corelib.sweeps import Condition, SweepConfig, SweepStats, condition_data, train_condition  # noqa: E402
from corelib.tasks.modular import modular_addition_split  # noqa: E402


def plain_loop(cfg: SweepConfig, cond: Condition, seeds: list[int], steps: int) -> float:
    """Seed-steps per second of the plain loop with full evaluations."""
    (x, y), (xt, yt) = modular_addition_split(cond.p, cfg.train_fraction, cfg.split_seed, cfg.split_permutation)
    model_cfg = cfg.model_config(cond.p)
    n, batch = len(x), cond.batch_size
    t0 = time.perf_counter()
    for seed in seeds:
        torch.manual_seed(seed)
        model = Transformer(model_cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cond.weight_decay)
        step, epoch = 0, 0
        while step < steps:
            order = epoch_order(n, seed, epoch)
            for i in range(0, n, batch):
                idx = order[i : i + batch]
                model.train()  # dropout on for the step, off for the accuracies
                loss = F.cross_entropy(model(x[idx])[:, -1], y[idx, -1])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                model.eval()
                with torch.no_grad():
                    train_acc = (model(x)[:, -1].argmax(-1) == y[:, -1]).float().mean().item()
                    test_acc = (model(xt)[:, -1].argmax(-1) == yt[:, -1]).float().mean().item()
                del train_acc, test_acc
                step += 1
                if step == steps:
                    break
            epoch += 1
    return len(seeds) * steps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="optimizer steps per side")
    ap.add_argument("--seeds", type=int, default=12, help="seeds trained together by the sweep engine")
    ap.add_argument("--plain-seeds", type=int, default=2, help="seeds trained one by one by the plain loop")
    ap.add_argument("--dropout", type=float, default=SweepConfig.dropout, help="dropout during training")
    args = ap.parse_args()
    if args.steps < 2:
        ap.error(f"--steps must be at least 2 (the cost of the steps is a difference of two runs), got {args.steps}")
    cfg, cond = SweepConfig(dropout=args.dropout), Condition(p=53, weight_decay=1.0, batch_size=512)
    seeds = [42 + s for s in range(args.seeds)]
    peak = matmul_gflops()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, p = {cond.p}, batch "
        f"{cond.batch_size}, dropout {cfg.dropout:g}, {args.steps} steps; fp32 matmul peak measured: "
        f"{peak:.1f} GFLOP/s"
    )

    plain_rate = plain_loop(cfg, cond, seeds[: args.plain_seeds], args.steps)
    model_cfg = cfg.model_config(cond.p)

    def run(steps: int, stats: SweepStats | None = None) -> None:
        train_condition(cond, seeds, cfg, max_steps=steps, device="cpu", progress=False, stats=stats)

    def timed(steps: int) -> tuple[float, SweepStats]:
        stats = SweepStats()
        t0 = time.perf_counter()
        run(steps, stats)
        return time.perf_counter() - t0, stats

    # Fixed costs (initialising the models, the full accuracy of every seed when it stops) are
    # paid once per condition; a difference of two runs measures the cost of the steps alone.
    t_short, short = timed(1)
    t_long, long_ = timed(args.steps)
    elapsed = t_long - t_short
    seed_steps = long_.seed_steps - short.seed_steps
    sweep_rate = seed_steps / elapsed
    eval_per_seed_step = (long_.eval_rows - short.eval_rows) / seed_steps
    print(f"sweep engine fixed cost per condition: {t_short:.2f} s (one step included)")

    # The work per seed-step, counted on the operations each side dispatches (apart from the
    # timed runs), and the dropout masks, which both sides draw alike for every step.
    n_count = min(args.steps, 5)
    sweep_flops = (counted_flops(lambda: run(n_count)) - counted_flops(lambda: run(1))) / ((n_count - 1) * len(seeds))
    plain_flops = counted_flops(lambda: plain_loop(cfg, cond, seeds[:1], 1))
    length = condition_data(cond, cfg)[0].prefixes.shape[1] + 1
    masks = mask_seconds(model_cfg, seeds, [cond.batch_size], length) / len(seeds) if cfg.dropout else 0.0
    for name, rate, flops in (
        ("plain loop, one seed at a time, full evaluation", plain_rate, plain_flops),
        (f"sweep engine, {args.seeds} seeds together, early exit", sweep_rate, sweep_flops),
    ):
        gflops = rate * flops / 1e9
        print(
            f"{name}: {rate:8.2f} seed-steps/s, {flops / 1e9:.2f} GFLOP per seed-step, {gflops:6.2f} GFLOP/s "
            f"({gflops / peak:.1%} of matmul peak)"
        )
    print(f"the engine evaluated {eval_per_seed_step:.0f} rows per seed-step")
    print(f"speed-up: {sweep_rate / plain_rate:.1f}x  (target >= 10x)")
    # What no tuning of the engine's method can beat here: its counted FLOPs at the full matmul
    # peak, plus the masks, which are drawn one element at a time on one core.
    ceiling = 1 / (sweep_flops / peak / 1e9 + masks)
    print(
        f"dropout masks: {masks * 1e3:.1f} ms per seed-step; the engine's ceiling here (its matmuls at 100% "
        f"of the peak, plus the masks): {ceiling:.1f} seed-steps/s, a speed-up of at most "
        f"{ceiling / plain_rate:.1f}x"
    )


if __name__ == "__main__":
    main()
