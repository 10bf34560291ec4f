"""Seed-steps per second of the grokking sweeps: 12 seeds together vs a plain loop, one seed at a time.

Both sides train the sweeps' model (one post-norm block, d_model 128, 4 heads, d_ff 512) on
modular addition with p = 53, batch 512, AdamW (lr 1e-3, weight decay 1), and know the training
and test accuracy of the weights after *every* optimizer step:

- **sweep engine** (:func:`corelib.sweeps.train_condition`): the 12 seeds in one vectorised model,
  last-position forward with shared prefixes, exact early-exit accuracy checks (a seed is decided
  as soon as its errors exceed the 1 % budget);
- **plain loop**: an ordinary PyTorch loop over one model (full forward over both positions, loss
  at the last position, ``torch.optim.AdamW``), followed after every step by a full forward over
  the whole training and test sets to compute both accuracies.

Both start from fresh models, so the measured steps are the early phase of training (no seed has
memorised yet: the early exit stops after the first chunk, which is also the situation of the
long phase between memorisation and generalisation for the test set). The plain loop's throughput
per seed does not depend on the number of seeds, so it is measured on ``--plain-seeds`` of them.
The sweep engine's fixed cost per condition (initialisation, a full evaluation of each seed when
it stops) is removed by timing a 1-step run and a ``--steps`` run and taking the difference; it
is printed separately.

The achieved GFLOP/s count the matmuls each side actually performs (:func:`corelib.sweeps.flops_per_row`:
training = 3 x forward; the plain loop computes 2 positions per example, the engine 1, without the
first block's query/key/value projection, which it does once per token) and are compared with
this machine's fp32 matmul throughput, measured here with a large matmul. Run from the project
root::

    python benchmarks/sweep_throughput.py              # 40 steps per side
    python benchmarks/sweep_throughput.py --steps 10   # quicker
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corelib.models import Transformer  # noqa: E402
from corelib.sweeps import Condition, SweepConfig, SweepStats, flops_per_row, train_condition  # noqa: E402
from corelib.tasks.modular import modular_addition_split  # noqa: E402
from corelib.training import epoch_order  # noqa: E402

from _machine import matmul_gflops  # noqa: E402


def plain_loop(cfg: SweepConfig, cond: Condition, seeds: list[int], steps: int) -> tuple[float, float]:
    """Seed-steps per second and FLOPs per seed-step of the plain loop with full evaluations."""
    (x, y), (xt, yt) = modular_addition_split(cond.p, cfg.train_fraction, cfg.split_seed)
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
    rate = len(seeds) * steps / (time.perf_counter() - t0)
    rows_per_step = n / -(-n // batch)  # average minibatch over an epoch
    flops = 2 * (rows_per_step * flops_per_row(model_cfg, training=True)
                 + (len(x) + len(xt)) * flops_per_row(model_cfg, training=False))
    return rate, flops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="optimizer steps per side")
    ap.add_argument("--seeds", type=int, default=12, help="seeds trained together by the sweep engine")
    ap.add_argument("--plain-seeds", type=int, default=2, help="seeds trained one by one by the plain loop")
    args = ap.parse_args()
    cfg, cond = SweepConfig(), Condition(p=53, weight_decay=1.0, batch_size=512)
    seeds = [42 + s for s in range(args.seeds)]
    peak = matmul_gflops()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, p = {cond.p}, batch "
          f"{cond.batch_size}, {args.steps} steps; fp32 matmul peak measured: {peak:.1f} GFLOP/s")

    plain_rate, plain_flops = plain_loop(cfg, cond, seeds[: args.plain_seeds], args.steps)

    model_cfg = cfg.model_config(cond.p)

    def timed(steps: int) -> tuple[float, SweepStats]:
        stats = SweepStats()
        t0 = time.perf_counter()
        train_condition(cond, seeds, cfg, max_steps=steps, device="cpu", progress=False, stats=stats)
        return time.perf_counter() - t0, stats

    # Fixed costs (initialising the models, the full accuracy of every seed when it stops) are
    # paid once per condition; a difference of two runs measures the cost of the steps alone.
    t_short, short = timed(1)
    t_long, long_ = timed(args.steps)
    elapsed = t_long - t_short
    sweep_rate = (long_.seed_steps - short.seed_steps) / elapsed
    # The engine projects the first block's queries, keys and values once per token.
    sweep_gflops = ((long_.train_rows - short.train_rows) * flops_per_row(model_cfg, True, per_token_qkv=True)
                    + (long_.eval_rows - short.eval_rows) * flops_per_row(model_cfg, False, per_token_qkv=True)
                    ) / elapsed / 1e9
    eval_per_seed_step = (long_.eval_rows - short.eval_rows) / (long_.seed_steps - short.seed_steps)
    print(f"sweep engine fixed cost per condition: {t_short:.2f} s (one step included)")
    plain_gflops = plain_rate * plain_flops / 1e9

    print(f"plain loop, one seed at a time, full evaluation: {plain_rate:8.2f} seed-steps/s, "
          f"{plain_gflops:6.2f} GFLOP/s ({plain_gflops / peak:.1%} of matmul peak)")
    print(f"sweep engine, {args.seeds} seeds together, early exit: {sweep_rate:8.2f} seed-steps/s, "
          f"{sweep_gflops:6.2f} GFLOP/s ({sweep_gflops / peak:.1%} of matmul peak); "
          f"evaluated {eval_per_seed_step:.0f} rows per seed-step")
    print(f"speed-up: {sweep_rate / plain_rate:.1f}x  (target >= 10x)")


if __name__ == "__main__":
    main()
