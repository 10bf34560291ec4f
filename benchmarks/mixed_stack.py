"""Models of one shape with different hyperparameters: one after another (today's callers) vs one mixed stack.

Three cases, each timed both ways in the same process, on the same data, after a warm-up that
compiles the dropout masks (so neither side pays for it):

- **Core inflation**: the book's modular-addition model (two blocks, d_model 128, p = 53, batch
  512, dropout 0.1, 3 seeds) as its two arms: weight decay 1 from epoch 0, and the branch without
  weight decay from the weight-decay run's snapshot at ``--branch``. Today: :func:`train_stack`
  for the weight-decay arm, then for the branch; mixed: one :func:`train_mixed` call, in which the
  branch joins at its epoch.
- **The clock's pairs**: the same model at four (lr, wd) pairs from epoch 0 (at equal epochs here;
  the chapter runs each to its own). Today: four :func:`train_stack` calls; mixed: one call.
- **A sweep's conditions that share a modulus**: the sweeps' model (one block, p = 53, batch 512,
  the last partial batch skipped) at six weight decays, on :class:`corelib.engine.Trainer` as
  :mod:`corelib.tasks.sweeps` uses it. Today: one trainer per condition; mixed: one trainer in which
  each condition is a group. (Without the sweep's per-step measurements, which are the same work
  either way.)

And the chapters' callers, rewired onto the mixed stack, each against its sequential path
(``--callers``; the analyses, the same work either way, left out):

- :func:`modular_runs.train_arms` vs :func:`modular_runs.train_arm` per arm (core inflation);
- :func:`inflation_clock_pairs.run_clock` vs one ``train_arm`` per pair (the clock, four clocks);
- :func:`inflation_clock_arms.run_window` vs one ``train_arm`` per branched arm (the window's five);
- :func:`corelib.tasks.sweeps.run_sweep` in one process vs one ``run_condition`` per condition (six
  weight decays at p = 53, each to its cap, with the sweep's per-step measurements).

Each side runs ``--repeats`` times, alternating, and the best time is printed. Each case also
checks that both ways trained the same weights, bit for bit (one CPU thread).
Run with one thread, as the book's records are: ``OMP_NUM_THREADS=1 python benchmarks/mixed_stack.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corelib.engine import (  # noqa: E402
    Arm,
    DropoutStreams,
    PrefixData,
    SeedStack,
    StackConfig,
    Trainer,
    train_mixed,
    train_stack,
)
from corelib.experiments import (  # noqa: E402
    inflation_clock,
    inflation_clock_arms,
    inflation_clock_pairs,
    modular_runs,
)
from corelib.models import TransformerConfig  # noqa: E402
from corelib.results import load_tensors  # noqa: E402
from corelib.tasks.modular import modular_addition_split  # noqa: E402
from corelib.tasks.sweeps import Condition, SweepConfig, run_condition, run_sweep  # noqa: E402

P = 53
SEEDS = (1031, 1032, 1033)
MODEL = TransformerConfig(vocab_size=P, d_model=128, n_heads=4, d_ff=512, n_layers=2, dropout=0.1)
SWEEP_MODEL = TransformerConfig(vocab_size=P, d_model=128, n_heads=4, d_ff=512, n_layers=1, dropout=0.1)
PAIRS = ((1e-3, 1.0), (1e-3, 3.0), (2e-3, 3.0), (3e-3, 2.0))
OMEGAS = (0.3, 0.5, 1.0, 1.5, 2.0, 3.0)


def _data() -> tuple[PrefixData, PrefixData]:
    (x, y), (xt, yt) = modular_addition_split(P, 0.5, 42, "numpy")
    return PrefixData.from_tokens(x, y), PrefixData.from_tokens(xt, yt)


def _cfg(epochs: int, **kw) -> StackConfig:
    # The chapters' schedule, scaled down: test accuracy, a snapshot and the state every 5 epochs.
    return StackConfig(epochs=epochs, batch_size=512, snapshot_every=5, checkpoint_every=5, eval_every=5, **kw)


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def inflation_arms(root: Path, epochs: int, branch: int) -> list[Arm]:
    return [
        Arm(_cfg(epochs), SEEDS, root / "wd"),
        Arm(_cfg(epochs, weight_decay=0.0), SEEDS, root / "no_wd", start=(root / "wd", branch)),
    ]


def clock_arms(root: Path, epochs: int) -> list[Arm]:
    return [Arm(_cfg(epochs, lr=lr, weight_decay=wd), SEEDS, root / f"lr{lr:g}_wd{wd:g}") for lr, wd in PAIRS]


def one_after_another(arms: list[Arm], data) -> list[dict[str, torch.Tensor]]:
    return [train_stack(MODEL, a.cfg, a.seeds, *data, a.run_dir, start=a.start, progress=False)[0].params for a in arms]


def mixed(arms: list[Arm], data) -> list[dict[str, torch.Tensor]]:
    return [stack.params for stack, _ in train_mixed(MODEL, arms, *data, progress=False)]


def sweep_trainer(wds: tuple[float, ...], seeds: tuple[int, ...], train: PrefixData) -> Trainer:
    """One trainer for the conditions ``wds``, each a group of ``seeds`` (the sweeps' settings)."""
    trainer = None
    for wd in wds:
        stack = SeedStack.initialise(SWEEP_MODEL, seeds, "cpu")
        streams = DropoutStreams(SWEEP_MODEL.dropout, seeds)
        if trainer is None:
            trainer = Trainer(stack, train, lr=1e-3, weight_decay=wd, batch_size=512, keep_partial_batch=False,
                              streams=streams, name=wd)  # fmt: skip
        else:
            trainer.join(stack, lr=1e-3, weight_decay=wd, streams=streams, name=wd)
    return trainer


def sweep(wds: tuple[float, ...], seeds: tuple[int, ...], epochs: int, train: PrefixData, together: bool) -> list:
    groups = [wds] if together else [(wd,) for wd in wds]
    weights = []
    for group in groups:
        trainer = sweep_trainer(group, seeds, train)
        for e in range(epochs):
            trainer.epoch(e)
        weights += [{k: v[span.start : span.stop].detach() for k, v in trainer.stack.params.items()}
                    for span in trainer.opt.spans.values()]  # fmt: skip
    return weights


ARMS = modular_runs.ARMS

# The book's modular model at the paper's rates, on horizons of tens of epochs.
INFLATION = dict(epochs=20, long_epochs=20, branch_epoch=10, snapshot_every=5, late_after=20, snapshot_every_late=5,
                 eval_every=5)  # fmt: skip
# tau 0.06: 20, 7, 4 and 4 epochs on the four clocks (3 steps an epoch); the window branches at tau 0.03.
CLOCK = dict(horizon=0.06, window_horizon=0.06, window_branch=0.03, anneal=(0.006, 0.012), late_removal=0.045,
             snapshot_unit=5, eval_every=2)  # fmt: skip


def _in_root(root: Path, work: Callable[[], None]) -> list:
    """``work`` with its results under ``root``, then the weights of every last snapshot there."""
    old = os.environ.get("ACE_RESULTS_DIR")
    os.environ["ACE_RESULTS_DIR"] = str(root)
    try:
        work()
    finally:
        os.environ.pop("ACE_RESULTS_DIR") if old is None else os.environ.update(ACE_RESULTS_DIR=old)
    found = []
    for run in sorted(p.parent for p in root.rglob("run.json")):
        last = max((run / "snapshots").glob("*.safetensors"), default=None)
        found.append(load_tensors(last, "cpu") if last else {})
    for rec in sorted(root.rglob("seed_*.json")):
        found.append({"record": torch.tensor([hash(rec.read_text())])})
    return found


def caller_cases() -> dict[str, tuple[Callable[[Path], list], Callable[[Path], list]]]:
    """Each rewired caller: (its sequential path, the caller itself), each in a fresh results root."""
    modular_runs.analyse_arm = lambda *a, **k: []  # the analyses are the same work either way
    p = modular_runs.ModularParams(**INFLATION)
    clock = inflation_clock.ClockParams(**CLOCK)
    pairs = [inflation_clock_pairs.pair_params(clock, lr, wd) for lr, wd in clock.pairs]
    base = inflation_clock_arms.window_base(clock)
    branch = inflation_clock_arms.window_branch_epoch(clock, [])
    branched = [(mp, arm) for mp, arm in inflation_clock_arms.window_arms(clock, branch).values() if arm != "wd"]
    cfg = SweepConfig(max_epochs=15)
    conds = [Condition(p=P, weight_decay=w, batch_size=512) for w in OMEGAS]
    seeds = (0, 1, 2, 3)

    def kept(root: Path) -> None:  # both window paths start from the kept run, trained alone (not timed apart)
        _in_root(root, lambda: modular_runs.train_arm(base, "wd", base.long_epochs, progress=False))

    return {
        "train_arms (core inflation)": (
            lambda r: _in_root(r, lambda: [modular_runs.train_arm(p, a, 20, progress=False) for a in ARMS]),
            lambda r: _in_root(r, lambda: modular_runs.train_arms(p, 20, progress=False)),
        ),
        "run_clock (4 pairs)": (
            lambda r: _in_root(
                r, lambda: [modular_runs.train_arm(mp, "wd", mp.long_epochs, progress=False) for mp in pairs]
            ),  # fmt: skip
            lambda r: _in_root(r, lambda: inflation_clock_pairs.run_clock(clock, progress=False)),
        ),
        "run_window (5 branched arms)": (
            lambda r: (
                kept(r)
                or _in_root(
                    r, lambda: [modular_runs.train_arm(mp, a, mp.long_epochs, progress=False) for mp, a in branched]
                )
            ),  # fmt: skip
            lambda r: kept(r) or _in_root(r, lambda: inflation_clock_arms.run_window(clock, progress=False)),
        ),
        f"run_sweep p = {P} (6 conditions)": (
            lambda r: [run_condition(c, seeds, cfg, root=r, progress=False) for c in conds] and _in_root(r, list),
            lambda r: run_sweep(conds, seeds, cfg, root=r, n_jobs=1, progress=False) is not None and _in_root(r, list),
        ),
    }


def timed(work: Callable[[Path], list], root: Path, repeats: int) -> tuple[float, list]:
    """The best wall time of ``repeats`` runs of ``work``, each in a fresh folder, and its weights."""
    best, out = float("inf"), []
    for _ in range(repeats):
        folder = Path(tempfile.mkdtemp(dir=root))
        t0 = time.perf_counter()
        out = work(folder)
        best = min(best, time.perf_counter() - t0)
    return best, out


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=20, help="epochs of each arm (core inflation, the clock)")
    parser.add_argument("--branch", type=int, default=10, help="epoch at which the branch joins (a snapshot)")
    parser.add_argument("--sweep-seeds", type=int, default=4, help="seeds per sweep condition")
    parser.add_argument("--sweep-epochs", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each side; the best is printed")
    parser.add_argument("--callers", action="store_true", help="time the rewired callers instead of the engine cases")
    return parser.parse_args()


def main() -> None:
    args = _args()
    data = _data()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); seconds, best of {args.repeats} runs")
    with tempfile.TemporaryDirectory() as tmp:
        train_mixed(MODEL, clock_arms(Path(tmp) / "warm", 1), *data, progress=False)  # compiles the masks
        sweep(OMEGAS[:2], (0, 1), 1, data[0], together=True)
        seeds = tuple(range(args.sweep_seeds))
        cases = (
            caller_cases()
            if args.callers
            else {
                "core inflation (2 arms, a branch)": (
                    lambda root: one_after_another(inflation_arms(root, args.epochs, args.branch), data),
                    lambda root: mixed(inflation_arms(root, args.epochs, args.branch), data),
                ),
                "the clock's pairs (4 arms)": (
                    lambda root: one_after_another(clock_arms(root, args.epochs), data),
                    lambda root: mixed(clock_arms(root, args.epochs), data),
                ),
                f"sweep at p = {P} (6 conditions)": (
                    lambda root: sweep(OMEGAS, seeds, args.sweep_epochs, data[0], together=False),
                    lambda root: sweep(OMEGAS, seeds, args.sweep_epochs, data[0], together=True),
                ),
            }
        )
        if args.callers:  # the window's kept run is timed on both sides alike
            print("callers: sequential path (train_arm / run_condition per unit) vs the caller on the mixed stack")
        print(f"{'case':38s} {'one after another':>18s} {'mixed stack':>12s} {'ratio':>7s}  same weights")
        for name, (today, stacked) in cases.items():
            # Alternated, best of each: the machine's other work weighs on both sides alike.
            t_today, w_today = timed(today, Path(tmp), 1)
            t_mixed, w_mixed = timed(stacked, Path(tmp), args.repeats)
            t_today = min(t_today, timed(today, Path(tmp), args.repeats - 1)[0]) if args.repeats > 1 else t_today
            same = len(w_today) == len(w_mixed) and all(_same(a, b) for a, b in zip(w_today, w_mixed))
            print(f"{name:38s} {t_today:18.1f} {t_mixed:12.1f} {t_today / t_mixed:6.2f}x  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
