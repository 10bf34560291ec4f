"""Epochs per second of modular addition: 3 seeds trained together (corelib.engine) vs the authors' loop.

Three sides train the book's modular-addition model (two blocks, d_model 128, p = 53, batch 512
keeping the last partial batch, AdamW lr 1e-3, weight decay 1, dropout 0.1 unless ``--dropout``)
on the same split and on the authors' schedule: training loss and accuracy every epoch, test
accuracy only at the save points, where the weights are saved: every 100 epochs, and at the last
epoch (which a short benchmark needs, so each timed run has one save point per seed).

- **The authors' loop**, written here to do what their reference code does: one model after
  another, each PyTorch's ``nn.TransformerEncoderLayer`` stack (:func:`_machine.reference_model`,
  given a causal mask because our model is causal, so both compute the same function), shuffled by
  a ``DataLoader`` with one generator per model; loss and accuracy at the last position of a full
  forward, ``torch.optim.AdamW``; at a save point, test accuracy in eval mode (the layer's fused
  inference path) and ``torch.save`` of the weights.
- **The in-house loop**: the same loop around our :class:`corelib.models.Transformer`. It replaces
  the earlier plain loop, which differed from it in its batch order and in measuring the test
  accuracy every epoch; the engine's old target over it (>= 2.5x) was set for that schedule, so
  none is printed now. Its gap to the authors' loop is what our model costs outside the engine.
- **The engine** (:func:`corelib.engine.train_stack`, the seeds together, last position only),
  with ``eval_every``, ``snapshot_every`` and ``checkpoint_every`` at the save interval: test
  accuracy, a snapshot and the resumable state at the same epochs (plus a snapshot of the initial
  weights). Its set-up and the save points are in the timed runs of every side.

Where the engine's time goes (``benchmarks/profile_engine.py``: torch.profiler, self time of its
operators grouped by kind, one thread, 3 seeds x 5 epochs after a warm-up, ms per seed-epoch with
the profiler on; both columns on the same AMD EPYC with AVX512-BF16, 2026-11-27, before and after
the dropout masks were compiled):

=====================  ======  ======
kind                   before  after
=====================  ======  ======
matmul (bmm, vmapped)  59.7    56.9
elementwise            20.8    16.3
Python and dispatch    10.7     8.9
dropout masks           9.3     1.9
copies and shapes       4.9     4.3
layer norm              1.4     1.3
attention softmax       1.1     1.0
AdamW (fused)           0.6     0.6
total                 108.6    91.2
=====================  ======  ======

The masks' gain is the change; the other rows moved by run-to-run noise. Three changes made the
engine faster, none of them changing a number it computes:

- **The dropout masks** are drawn by one compiled loop per step and site instead of some 25 eager
  integer passes (:mod:`corelib.masks`; ``torch.compile``, exact integer arithmetic; a test holds
  the compiled masks equal to the eager ones and to a per-element reference).
- **One matrix product per seed** (:mod:`corelib.seed_linear`): on two threads PyTorch hands a
  batched product's three seeds to its two threads one matrix each, so one thread idled for a
  third of every product (139-156 GFLOP/s against 182-195 one seed at a time). A product is split
  only where it was checked to give the batched product's values bit for bit; with one thread,
  as profiled here, nothing is split.
- **Freed memory kept for the next step** (:mod:`corelib.cpu_memory`, applied to every side of
  this benchmark): the step's large tensors no longer fault in fresh pages.

On two threads the profile reads matmul 49 %, Python and dispatch 21 %, elementwise 18 %: the
elementwise chain of each block (bias, residual, activation and their gradients: ``mul``,
``add``, ``sum``) and the Python between operators are where a faster engine has to gain.
Fusing that chain with ``torch.compile`` (inductor; the vmapped forward pass, loss and backward
pass as one graph without breaks, static shapes) was timed against the eager step, alternating,
3 x 20 steps each on one thread (AMD EPYC with AVX512-BF16, 2026-11-27): 0.94-0.95x the eager
rate, after 12 s of compilation. The engine's passes stay eager.

**How the sides are timed.** Every side first trains one epoch untimed; then ``--repeats``
rounds (3) each run every side once, and the rates are the medians, with each round's ratio
printed beside them. The warm-up matters for the engine: counting FLOPs runs under a dispatch
mode, where it neither compiles its masks nor checks its per-seed products, so before the
warm-up its one timed run paid those one-off costs of its process (about 0.4 s of 3.3 s). Side
by side on the AMD EPYC with AVX512-BF16 (2026-11-27): 1.42-1.55x the authors' loop in four
single-run invocations before, 1.61-1.65x in three invocations since (rounds 1.59-1.72x), the
engine at 41-43 % of the fp32 matmul peak, the authors' loop at 37-38 %.

It also prints each side's FLOPs per second (counted on the operations it dispatches) against this
machine's fp32 matmul peak, the time of the dropout masks, the engine's ceiling (its FLOPs at the
peak plus the masks: the most any tuning could reach), and what the book profile's training for
the two modular-addition chapters costs at the measured rate and at the ceiling. Run from the
project root::

    python benchmarks/train_throughput.py              # 3 rounds of 20 epochs per side
    python benchmarks/train_throughput.py --epochs 5 --repeats 1   # quicker
    python benchmarks/train_throughput.py --dropout 0  # the engine's shared-prefix path
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

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
from acebook.project import profile_parameters  # noqa: E402
from corelib.engine import PrefixData, StackConfig, train_stack  # noqa: E402
from corelib.experiments.modular_runs import ModularParams  # noqa: E402
from corelib.models import DEVICE_VARIABLE, Transformer  # noqa: E402
from corelib.tasks.modular import modular_addition_split  # noqa: E402

SAVE_EVERY = 100  # the reference saves the weights, and measures the test accuracy, every 100 epochs

Split = tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def book_seed_epochs() -> int:
    """Seed-epochs the book profile trains for the modular-addition and core-inflation chapters."""
    fig2 = ModularParams(**profile_parameters("modular_addition", "book"))
    infl = ModularParams(**profile_parameters("core_inflation", "book"))
    wd_arm = max(fig2.epochs, infl.long_epochs)  # one weight-decay run serves both chapters
    no_wd_arm = infl.long_epochs - infl.branch_epoch  # the branch without weight decay
    return len(infl.seeds) * (wd_arm + no_wd_arm)


def save_points(epochs: int) -> int:
    """How many save points (test accuracy and saved weights) a run of ``epochs`` epochs has."""
    return epochs // SAVE_EVERY + (epochs % SAVE_EVERY != 0)


def authors_loop(build: Callable[[], nn.Module], p: ModularParams, data: Split, seed: int, epochs: int) -> list:
    """Train one model for ``epochs`` epochs as the authors' loop does; its per-epoch history.

    ``build()`` makes the model after ``torch.manual_seed(seed)``. Test accuracy (``None``
    otherwise) and saved weights at the save points only.
    """
    (x_tr, y_tr), (x_te, y_te) = data
    torch.manual_seed(seed)
    model = build()
    opt = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=p.weight_decay)
    shuffle = torch.Generator().manual_seed(seed)
    loader = DataLoader(TensorDataset(x_tr, y_tr[:, -1]), batch_size=p.batch_size, shuffle=True, generator=shuffle)
    history = []
    with tempfile.TemporaryDirectory() as folder:
        for epoch in range(1, epochs + 1):
            model.train()
            total, correct = 0.0, 0
            for xb, yb in loader:
                logits = model(xb)[:, -1]
                loss = F.cross_entropy(logits, yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item() * len(xb)
                correct += int((logits.argmax(-1) == yb).sum())
            test_acc = None
            if epoch % SAVE_EVERY == 0 or epoch == epochs:
                model.eval()
                with torch.no_grad():
                    test_acc = (model(x_te)[:, -1].argmax(-1) == y_te[:, -1]).float().mean().item()
                torch.save(model.state_dict(), Path(folder) / f"epoch_{epoch}.pt")
            history.append((total / len(x_tr), correct / len(x_tr), test_acc))
    return history


def per_epoch_flops(run: Callable[[int], object]) -> tuple[float, float]:
    """FLOPs of one training epoch and of one save point of ``run(epochs)``.

    Counted on a 1-epoch and a 2-epoch run, each with one save point (at its end).
    """
    one, two = counted_flops(lambda: run(1)), counted_flops(lambda: run(2))
    return two - one, 2 * one - two


def timed_rounds(
    sides: dict[str, Callable[[int], object]], epochs: int, seeds: int, repeats: int
) -> dict[str, list[float]]:
    """Seed-epochs per second of each side (``side(epochs)`` trains ``seeds`` models) in each of
    ``repeats`` rounds.

    Every side first trains one epoch untimed, so that no timed run pays a one-off cost of its
    process (the engine's compiled masks and its per-seed product checks, first allocations):
    the rates are those of a long run. A round then runs every side once, so a slow spell of the
    machine falls on all sides of a round rather than on one side.
    """
    for side in sides.values():
        side(1)
    rounds: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeats):
        for name, side in sides.items():
            t0 = time.perf_counter()
            side(epochs)
            rounds[name].append(seeds * epochs / (time.perf_counter() - t0))
    return rounds


def print_speed_ups(rates: dict[str, float], gflops: dict[str, float], peak: float) -> None:
    """The fp32 engine against each loop, with the target and each side's share of the peak; then bf16."""
    for name, label, target in (
        ("authors", "the authors' loop", "  (target >= 1.5x)"),
        ("in-house", "the in-house loop", ""),
    ):
        print(
            f"speed-up over {label}: {rates['engine'] / rates[name]:.2f}x{target}; GFLOP/s: engine "
            f"{gflops['engine']:.1f} ({gflops['engine'] / peak:.0%} of peak), {label[4:]} "
            f"{gflops[name]:.1f} ({gflops[name] / peak:.0%} of peak)"
        )
    print_bf16(rates, gflops)


def print_bf16(rates: dict[str, float], gflops: dict[str, float]) -> None:
    """The bf16 side against the fp32 engine and the authors' loop, with its share of the bf16 peak."""
    if not NATIVE_BF16:
        print(NO_BF16)
        return
    bf16_peak = matmul_gflops(dtype=torch.bfloat16)
    print(
        f"bf16: {rates['engine bf16'] / rates['engine']:.2f}x the engine's fp32 rate (adopted where >= 1.3x); "
        f"{rates['engine bf16'] / rates['authors']:.2f}x the authors' loop (target >= 2.5x); "
        f"{gflops['engine bf16'] / bf16_peak:.0%} of the measured {bf16_peak:.1f} GFLOP/s bf16 matmul peak"
    )


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20, help="epochs per timed run")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1031, 1032, 1033])
    ap.add_argument("--dropout", type=float, default=ModularParams.dropout)
    ap.add_argument("--repeats", type=int, default=3, help="rounds of every side, one after another (medians)")
    args = ap.parse_args()
    for name in ("epochs", "repeats"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    return args


def main() -> None:
    args = _args()
    p = ModularParams(seeds=tuple(args.seeds), dropout=args.dropout)
    data = modular_addition_split(p.p, p.train_fraction, p.split_seed, p.split_permutation)
    (x_tr, y_tr), (x_te, y_te) = data
    model_cfg = p.model_config()
    seeds = list(args.seeds)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {len(seeds)} seeds, {args.epochs} epochs, "
        f"{len(x_tr)} training pairs, batch {p.batch_size}, dropout {p.dropout}; test accuracy and saved "
        f"weights every {SAVE_EVERY} epochs and at the last; {same_allocator_for_every_side()}"
    )

    def authors(epochs: int, seed: int = seeds[0]) -> None:
        authors_loop(lambda: reference_model(p.p, p.n_layers, p.dropout), p, data, seed, epochs)

    def in_house(epochs: int, seed: int = seeds[0]) -> None:
        authors_loop(lambda: Transformer(model_cfg), p, data, seed, epochs)

    def engine(epochs: int, precision: str = "fp32") -> None:
        cfg = StackConfig(
            precision=precision,
            epochs=epochs,
            batch_size=p.batch_size,
            lr=p.lr,
            weight_decay=p.weight_decay,
            snapshot_every=SAVE_EVERY,
            checkpoint_every=SAVE_EVERY,
            eval_every=SAVE_EVERY,
        )
        train = PrefixData.from_tokens(x_tr, y_tr)
        with tempfile.TemporaryDirectory() as tmp:
            train_stack(model_cfg, cfg, seeds, train, PrefixData.from_tokens(x_te, y_te), Path(tmp), progress=False)

    # The work per seed-epoch of each side as timed (its training epochs and save points),
    # counted on the operations it dispatches. Counting runs under a dispatch mode, where the
    # engine neither compiles its masks nor checks its per-seed products: timed_rounds warms up.
    counts = {"authors": per_epoch_flops(authors), "in-house": per_epoch_flops(in_house)}
    train_e, save_e = per_epoch_flops(engine)
    counts["engine"] = (train_e / len(seeds), save_e / len(seeds))
    if NATIVE_BF16:
        counts["engine bf16"] = counts["engine"]
    saves = save_points(args.epochs) / args.epochs
    flops = {name: train + save * saves for name, (train, save) in counts.items()}

    sides: dict[str, Callable[[int], object]] = {
        "authors": lambda n: [authors(n, s) for s in seeds],
        "in-house": lambda n: [in_house(n, s) for s in seeds],
    }
    sides |= {name: functools.partial(engine, precision=precision) for name, precision in ENGINE_SIDES}
    rounds = timed_rounds(sides, args.epochs, len(seeds), args.repeats)
    rates = {name: float(np.median(r)) for name, r in rounds.items()}

    # The engine's dropout masks (counter-based, only the elements its passes use); the loops'
    # nn.Dropout layers draw their own inside the timed runs.
    batches = [min(p.batch_size, len(x_tr) - i) for i in range(0, len(x_tr), p.batch_size)]
    masks = mask_seconds(model_cfg, seeds, batches, x_tr.shape[1]) / len(seeds) if p.dropout else 0.0
    peak = matmul_gflops()
    labels = {
        "authors": "authors' loop (torch encoder layers), one seed after another",
        "in-house": "in-house loop (our Transformer), one seed after another",
        "engine": f"vectorised engine, {len(seeds)} seeds together",
        "engine bf16": f"vectorised engine, {len(seeds)} seeds together, bf16",
    }
    labels = {k: v for k, v in labels.items() if k in rates}
    gflops = print_sides(labels, rates, flops, peak, "seed-epoch")
    print_speed_ups(rates, gflops, peak)
    per_round = ", ".join(f"{e / a:.2f}x" for e, a in zip(rounds["engine"], rounds["authors"]))
    print(f"speed-up over the authors' loop in each of the {args.repeats} rounds: {per_round} (medians above)")
    # What no implementation of the engine's method can beat on this machine: its fp32 matmuls at
    # the full peak, plus the masks.
    ceiling = 1 / (flops["engine"] / peak / 1e9 + masks)
    print(
        f"dropout masks: {masks * 1e3:.0f} ms per seed-epoch; the engine's ceiling here (its matmuls at "
        f"100% of the peak, plus the masks): {ceiling:.2f} seed-epochs/s, a speed-up of at most "
        f"{ceiling / rates['authors']:.2f}x over the authors' loop ({ceiling / rates['in-house']:.2f}x over "
        "the in-house loop)"
    )
    # The book profile measures the test accuracy every eval_every epochs (with every snapshot).
    p_book = ModularParams(**profile_parameters("modular_addition", "book"))
    book_epoch = counts["engine"][0] + counts["engine"][1] / p_book.eval_every
    n = book_seed_epochs()
    print(
        f"book profile, modular addition + core inflation: {n} seed-epochs of training; "
        f"{n / rates['engine'] / 60:.1f} min at the engine's rate, >= "
        f"{n * (book_epoch / peak / 1e9 + masks) / 60:.1f} min at the engine's ceiling"
    )


if __name__ == "__main__":
    os.environ[DEVICE_VARIABLE] = "cpu"  # every side on the CPU, measured against its matmul peak
    main()
