"""Epochs per second: 3 seeds trained together (corelib.engine) vs one after another (plain loop).

Both sides train the book's modular-addition model (two blocks, d_model 128, p = 53, batch 512,
AdamW, weight decay 1, dropout 0.1 unless ``--dropout`` says otherwise) on the same data and
record the same history every epoch: training loss, training accuracy and test accuracy of each
seed. The plain loop is
:func:`corelib.training.train`, an ordinary PyTorch loop over one model (full forward, loss at the
last position). Run from the project root::

    python benchmarks/train_throughput.py            # 20 epochs per side
    python benchmarks/train_throughput.py --epochs 5 # quicker
    python benchmarks/train_throughput.py --dropout 0  # the engine's shared-prefix path

It also prints the matmul FLOPs each side performs per second, as a fraction of this machine's
measured fp32 matmul peak, and what the book profile's training for the two modular-addition
chapters (Figure 2, then both arms of the core-inflation run) costs: its seed-epochs, its time at
the engine's measured rate, and a lower bound at 100 % of the matmul peak.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corelib.engine import PrefixData, StackConfig, train_stack  # noqa: E402
from corelib.tasks.modular import modular_addition_split  # noqa: E402
from corelib.experiments.modular import ModularParams  # noqa: E402
from corelib.training import TrainConfig, train  # noqa: E402
from corelib.models import Transformer  # noqa: E402
from corelib.runner import profile_parameters  # noqa: E402
from corelib.sweeps import flops_per_row  # noqa: E402

from _machine import matmul_gflops  # noqa: E402


def book_seed_epochs() -> int:
    """Seed-epochs the book profile trains for the modular-addition and core-inflation chapters."""
    fig2 = ModularParams(**profile_parameters("modular_addition", "book"))
    infl = ModularParams(**profile_parameters("core_inflation", "book"))
    wd_arm = max(fig2.epochs, infl.long_epochs)       # one weight-decay run serves both chapters
    no_wd_arm = infl.long_epochs - infl.branch_epoch  # the branch without weight decay
    return len(infl.seeds) * (wd_arm + no_wd_arm)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1031, 1032, 1033])
    ap.add_argument("--dropout", type=float, default=ModularParams.dropout)
    args = ap.parse_args()
    p = ModularParams(seeds=tuple(args.seeds), dropout=args.dropout)
    (x_tr, y_tr), (x_te, y_te) = modular_addition_split(p.p, p.train_fraction, p.split_seed)
    model_cfg = p.model_config()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {len(args.seeds)} seeds, "
          f"{args.epochs} epochs, {len(x_tr)} training pairs, batch {p.batch_size}, dropout {p.dropout}")

    t0 = time.perf_counter()
    for seed in args.seeds:
        torch.manual_seed(seed)
        model = Transformer(model_cfg)
        train(model, (x_tr, y_tr), TrainConfig(epochs=args.epochs, batch_size=p.batch_size, lr=p.lr,
                                               weight_decay=p.weight_decay, score_positions="last"),
              seed=seed, test_data=(x_te, y_te), progress=False)
    plain = len(args.seeds) * args.epochs / (time.perf_counter() - t0)

    with tempfile.TemporaryDirectory() as tmp:
        cfg = StackConfig(epochs=args.epochs, batch_size=p.batch_size, lr=p.lr,
                          weight_decay=p.weight_decay, snapshot_every=10**9, checkpoint_every=10**9)
        t0 = time.perf_counter()
        train_stack(model_cfg, cfg, args.seeds, PrefixData.from_tokens(x_tr, y_tr),
                    PrefixData.from_tokens(x_te, y_te), Path(tmp) / "run", progress=False)
        stacked = len(args.seeds) * args.epochs / (time.perf_counter() - t0)

    # Matmul work per seed-epoch: the plain loop runs both positions of every training and test
    # example. The engine evaluates the last position only (the 53 shared prefixes are
    # negligible), with the first block's query/key/value projection done once per token; it
    # trains that way too without dropout. With dropout each example's first position has its own
    # masks, so it trains with Transformer.forward_last: the first position through every block
    # but the last, where only its keys and values are needed.
    n_tr, n_te = len(x_tr), len(x_te)
    last_only = flops_per_row(model_cfg, False, per_token_qkv=True)
    both = 2 * flops_per_row(model_cfg, False)
    d, f, n_layers = model_cfg.d_model, model_cfg.d_ff, model_cfg.n_layers
    forward_last = flops_per_row(model_cfg, False) + 2 * ((n_layers - 1) * (4 * d * d + 2 * d * f) + 2 * d * d)

    def epoch_flops(train_forward: float, test_forward: float, eval_every: int = 1) -> float:
        return n_tr * 3 * train_forward + n_te * test_forward / eval_every  # backward = 2 forwards

    engine_train = forward_last if p.dropout else last_only
    engine_flops = epoch_flops(engine_train, last_only)
    plain_flops = epoch_flops(both, both)
    peak = matmul_gflops()
    for name, rate, flops in (("plain loop, one seed after another", plain, plain_flops),
                              ("vectorised engine, seeds together ", stacked, engine_flops)):
        gflops = rate * flops / 1e9
        print(f"{name}: {rate:7.2f} seed-epochs/s, {gflops:6.1f} GFLOP/s ({gflops / peak:.0%} of the "
              f"measured {peak:.1f} GFLOP/s matmul peak)")
    print(f"speed-up: {stacked / plain:.2f}x  (target >= 2.5x)")
    # The book profile evaluates the test set every eval_every epochs, not every epoch.
    p_book = ModularParams(**profile_parameters("modular_addition", "book"))
    book_flops = epoch_flops(forward_last if p_book.dropout else last_only, last_only, p_book.eval_every)
    n = book_seed_epochs()
    print(f"book profile, modular addition + core inflation: {n} seed-epochs of training; "
          f"{n / stacked / 60:.1f} min at the engine's rate, >= {n * book_flops / peak / 1e9 / 60:.1f} min "
          "even at 100% of the matmul peak")


if __name__ == "__main__":
    main()
