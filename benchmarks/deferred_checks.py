"""A sweep condition's stopping checks read after every step vs every few steps, side by side.

The sweeps decide after every optimizer step whether each seed has memorised, generalised, or
waited long enough to stop (:mod:`corelib.tasks.stopping_rules`). Read after every step
(``sync_every`` 1) the checks stop early, chunk by chunk, which needs the host to read the device
several times a step: cheap on a CPU, a stall of the launch queue on a GPU. Read every
``--sync-every`` steps (:class:`~corelib.tasks.stopping_rules.DeferredMonitor`) the device counts
every seed's correct answers on both whole sets and is read once a span.

Both sides train the same condition (the paper profile's sweeps model, 12 seeds, to ``--steps``
steps, or until the seeds stop) in the same process, alternating ``--repeats`` times; the best
time of each is printed with their ratio, and the records are checked equal (on a CPU with one
thread, bit for bit; elsewhere a difference is printed, not hidden). Run from the project root::

    OMP_NUM_THREADS=1 python benchmarks/deferred_checks.py               # CPU, 300 steps
    python benchmarks/deferred_checks.py --device cuda --steps 3000      # where the span is meant to help
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import torch

from corelib.tasks.sweeps import Condition, SweepConfig, train_condition


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, mps")
    ap.add_argument("--p", type=int, default=53, help="modulus")
    ap.add_argument("--batch", type=int, default=512, help="minibatch size (0: full batch)")
    ap.add_argument("--seeds", type=int, default=12, help="seeds trained together")
    ap.add_argument("--steps", type=int, default=300, help="steps per side (the cap)")
    ap.add_argument("--sync-every", type=int, default=50, help="steps between reads of the deferred side")
    ap.add_argument("--repeats", type=int, default=2, help="alternating runs per side; the best is printed")
    return ap


def _check_args(args: argparse.Namespace) -> torch.device:
    for name in ("p", "seeds", "steps", "sync_every", "repeats"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}.")
    if args.sync_every == 1:
        raise SystemExit("--sync-every 1 is the other side; give a span of at least 2 steps.")
    try:
        device = torch.device(args.device)
    except RuntimeError as err:
        raise SystemExit(f"--device: {err}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: this machine has no CUDA GPU (or torch was built without CUDA).")
    return device


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    args = _parser().parse_args(argv)
    device = _check_args(args)
    cfg = SweepConfig()
    cond = Condition(p=args.p, weight_decay=1.0, batch_size=args.batch or None)
    seeds = [42 + s for s in range(args.seeds)]

    def run(sync_every: int) -> tuple[float, list[dict]]:
        _synchronize(device)
        start = time.perf_counter()
        recs = train_condition(
            cond, seeds, cfg, max_steps=args.steps, device=device, progress=False, sync_every=sync_every
        )
        _synchronize(device)
        return time.perf_counter() - start, recs

    run(1)  # warm-up: first kernels, compiled masks, allocator
    best = {1: float("inf"), args.sync_every: float("inf")}
    records = {}
    for _ in range(args.repeats):
        for side in best:
            seconds, records[side] = run(side)
            best[side] = min(best[side], seconds)
    same = records[1] == records[args.sync_every]
    print(f"{cond.label()}, {args.seeds} seeds, {args.steps} steps on {device} ({torch.get_num_threads()} threads)")
    print(f"  checks read after every step     : {best[1]:8.2f} s")
    print(f"  checks read every {args.sync_every:>4} steps     : {best[args.sync_every]:8.2f} s")
    print(f"  ratio (every step / every span)  : {best[1] / best[args.sync_every]:8.2f}x")
    print(f"  records equal                    : {'yes' if same else 'NO: the stacks rounded differently'}")
    return {"every_step": best[1], "every_span": best[args.sync_every], "same_records": float(same)}


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
