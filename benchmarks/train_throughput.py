"""Epochs per second: 3 seeds trained together (corelib.engine) vs one after another (plain loop).

Both sides train the book's modular-addition model (two blocks, d_model 128, p = 53, batch 512,
AdamW, weight decay 1, dropout 0.1 unless ``--dropout``) on the same data and record training
loss, training accuracy and test accuracy of each seed every epoch. The plain loop is an ordinary
PyTorch loop over one model (full forward, loss at the last position, ``torch.optim.AdamW``).

It also prints each side's FLOPs per second (counted on the operations it dispatches) against this
machine's fp32 matmul peak, the time of the dropout masks, the engine's ceiling (its FLOPs at the
peak plus the masks: the most any tuning could reach), and what the book profile's training for
the two modular-addition chapters costs at the measured rate and at the ceiling. Run from the
project root::

    python benchmarks/train_throughput.py              # 20 epochs per side
    python benchmarks/train_throughput.py --epochs 5   # quicker
    python benchmarks/train_throughput.py --dropout 0  # the engine's shared-prefix path
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _machine import counted_flops, mask_seconds, matmul_gflops  # noqa: E402
from acebook.project import profile_parameters  # noqa: E402
from corelib.engine import PrefixData, SeedStack, StackConfig, epoch_order, train_stack  # noqa: E402
from corelib.experiments.modular import ModularParams  # noqa: E402
from corelib.models import Transformer  # noqa: E402
from corelib.tasks.modular import modular_addition_split  # noqa: E402


def book_seed_epochs() -> int:
    """Seed-epochs the book profile trains for the modular-addition and core-inflation chapters."""
    fig2 = ModularParams(**profile_parameters("modular_addition", "book"))
    infl = ModularParams(**profile_parameters("core_inflation", "book"))
    wd_arm = max(fig2.epochs, infl.long_epochs)  # one weight-decay run serves both chapters
    no_wd_arm = infl.long_epochs - infl.branch_epoch  # the branch without weight decay
    return len(infl.seeds) * (wd_arm + no_wd_arm)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1031, 1032, 1033])
    ap.add_argument("--dropout", type=float, default=ModularParams.dropout)
    args = ap.parse_args()
    p = ModularParams(seeds=tuple(args.seeds), dropout=args.dropout)
    (x_tr, y_tr), (x_te, y_te) = modular_addition_split(p.p, p.train_fraction, p.split_seed, p.split_permutation)
    model_cfg = p.model_config()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {len(args.seeds)} seeds, "
        f"{args.epochs} epochs, {len(x_tr)} training pairs, batch {p.batch_size}, dropout {p.dropout}"
    )

    def plain_run(seed: int, epochs: int) -> None:
        torch.manual_seed(seed)
        model = Transformer(model_cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=p.weight_decay)
        history = []
        for epoch in range(epochs):
            model.train()
            order = epoch_order(len(x_tr), seed, epoch)
            total, correct = 0.0, 0
            for i in range(0, len(x_tr), p.batch_size):
                idx = order[i : i + p.batch_size]
                logits = model(x_tr[idx])[:, -1]
                loss = F.cross_entropy(logits, y_tr[idx, -1])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item() * len(idx)
                correct += int((logits.argmax(-1) == y_tr[idx, -1]).sum())
            with torch.no_grad():
                test_acc = (model.eval()(x_te)[:, -1].argmax(-1) == y_te[:, -1]).double().mean().item()
            history.append((total / len(x_tr), correct / len(x_tr), test_acc))

    t0 = time.perf_counter()
    for seed in args.seeds:
        plain_run(seed, args.epochs)
    plain = len(args.seeds) * args.epochs / (time.perf_counter() - t0)

    def engine_run(epochs: int, tmp: str, eval_every: int = 1) -> None:
        cfg = StackConfig(
            epochs=epochs,
            batch_size=p.batch_size,
            lr=p.lr,
            weight_decay=p.weight_decay,
            snapshot_every=10**9,
            checkpoint_every=10**9,
            eval_every=eval_every,
        )
        train_stack(
            model_cfg,
            cfg,
            args.seeds,
            PrefixData.from_tokens(x_tr, y_tr),
            PrefixData.from_tokens(x_te, y_te),
            Path(tmp) / "run",
            progress=False,
        )

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        engine_run(args.epochs, tmp)
        stacked = len(args.seeds) * args.epochs / (time.perf_counter() - t0)

    # The work of one epoch of each side (training with the test accuracy every epoch, as timed),
    # counted on the operations each side dispatches, and the cost of the dropout masks that
    # both sides draw alike (the engine draws them whole, as nn.Dropout does, and cuts them).
    with tempfile.TemporaryDirectory() as tmp:
        engine_flops = counted_flops(lambda: engine_run(1, tmp)) / len(args.seeds)
    test_pass = counted_flops(
        lambda: SeedStack.initialise(model_cfg, args.seeds, "cpu").accuracy(PrefixData.from_tokens(x_te, y_te))
    ) / len(args.seeds)
    plain_flops = counted_flops(lambda: plain_run(args.seeds[0], 1))
    batches = [min(p.batch_size, len(x_tr) - i) for i in range(0, len(x_tr), p.batch_size)]
    masks = mask_seconds(model_cfg, list(args.seeds), batches, x_tr.shape[1]) / len(args.seeds) if p.dropout else 0.0
    peak = matmul_gflops()
    for name, rate, flops in (
        ("plain loop, one seed after another", plain, plain_flops),
        ("vectorised engine, seeds together ", stacked, engine_flops),
    ):
        gflops = rate * flops / 1e9
        print(
            f"{name}: {rate:7.2f} seed-epochs/s, {flops / 1e9:5.2f} GFLOP per seed-epoch, {gflops:6.1f} "
            f"GFLOP/s ({gflops / peak:.0%} of the measured {peak:.1f} GFLOP/s matmul peak)"
        )
    print(f"speed-up: {stacked / plain:.2f}x  (target >= 2.5x)")
    # What no implementation of the engine's method can beat on this machine: its matmuls at the
    # full peak, plus the masks, which are drawn one element at a time on one core.
    ceiling = 1 / (engine_flops / peak / 1e9 + masks)
    print(
        f"dropout masks: {masks * 1e3:.0f} ms per seed-epoch; the engine's ceiling here (its matmuls at "
        f"100% of the peak, plus the masks): {ceiling:.2f} seed-epochs/s, a speed-up of at most "
        f"{ceiling / plain:.2f}x"
    )
    # The book profile evaluates the test set every eval_every epochs, not every epoch.
    p_book = ModularParams(**profile_parameters("modular_addition", "book"))
    book_epoch = engine_flops - test_pass * (1 - 1 / p_book.eval_every)
    n = book_seed_epochs()
    print(
        f"book profile, modular addition + core inflation: {n} seed-epochs of training; "
        f"{n / stacked / 60:.1f} min at the engine's rate, >= {n * (book_epoch / peak / 1e9 + masks) / 60:.1f} "
        "min at the engine's ceiling"
    )


if __name__ == "__main__":
    main()
