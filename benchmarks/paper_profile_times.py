"""How long the paper profile of core inflation and of the grokking sweeps takes on this machine's
device (a CUDA GPU where there is one), from short slices of the very runs, beside the CPU times the
records hold.

The paper profile trains for hours on a CPU, longer than a borrowed GPU is lent for. So each run is
timed over a slice of its own code path, with the paper's settings (the records' ``params``), and
the slice's rate is scaled to the records' lengths:

- **Core inflation** (:func:`corelib.engine.train_stack`, 3 seeds stacked): seconds per epoch of
  training, with its evaluation every 10 epochs and its snapshots, measured on epochs
  ``warm .. warm + timed`` of the weight-decay arm (a resumed run, so start-up is not counted).
  Each arm's time is that rate times the epochs it trains (20000, and 19100 after the branch at
  epoch 900); both arms run the same step, the other only without weight decay.
- **Sweeps** (:func:`corelib.sweeps.train_condition`, 12 seeds stacked): seconds per step, with
  the accuracy checks after every step, for each (p, batch) shape of the record's conditions, at
  12 seeds and at 1 (a seed leaves the stack when it stops). A ``steps``-step run minus a 1-step
  run removes the fixed cost of a condition (data, initialisation). A condition's time is the sum,
  over its recorded steps, of the step time at the number of seeds still running (linear between
  the two measured sizes); weight decay does not change the cost of a step.

The scaled times leave out what the slices do not run: core inflation's snapshot analyses (ACE on
each snapshot, done once after training) and the sweeps' bootstrap fits (seconds). ``--check``
also trains one whole sweep condition and prints its measured time beside its scaled one.

Run from the project root::

    python benchmarks/paper_profile_times.py                         # the default slices
    python benchmarks/paper_profile_times.py --out times.json        # also write them, with the machine
    python benchmarks/paper_profile_times.py --check "p=53 wd=3 B=512"
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from acebook.record import machine  # noqa: E402
from corelib.engine import PrefixData, train_stack  # noqa: E402
from corelib.experiments.grokking_sweeps import SweepsParams  # noqa: E402
from corelib.experiments.modular_runs import ModularParams, make_data  # noqa: E402
from corelib.models import default_device  # noqa: E402
from corelib.recorded import load_recorded  # noqa: E402
from corelib.sweeps import Condition, SweepConfig, condition_key, train_condition  # noqa: E402


def device_description(device: torch.device) -> dict:
    """The machine (:func:`acebook.record.machine`, which names the GPU) and, on CUDA, the GPU's
    compute capability and the CUDA version."""
    out = machine()
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        out |= {"capability": f"{major}.{minor}", "cuda": torch.version.cuda}
    return out


def timed(work: Callable[[], object], device: torch.device) -> float:
    """Wall seconds of ``work()``, with the device's queue drained before and after."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


# ---------------------------------------------------------------- core inflation


def inflation_epoch_seconds(params: ModularParams, warm: int, timed_epochs: int, device: torch.device) -> float:
    """Seconds per epoch of the weight-decay arm over epochs ``warm .. warm + timed_epochs``.

    ``warm`` must be a multiple of the run's checkpoint interval, so the second call resumes there.
    """
    data = make_data(params)
    train, test = (PrefixData.from_tokens(*data[k]) for k in ("train", "test"))
    with tempfile.TemporaryDirectory() as folder:

        def run(epochs: int) -> None:
            cfg = params.stack_config("wd", epochs)
            train_stack(params.model_config(), cfg, params.seeds, train, test, Path(folder), device=device,
                        progress=False)  # fmt: skip

        run(warm)
        return timed(lambda: run(warm + timed_epochs), device) / timed_epochs


def inflation_times(record: dict, per_epoch: float) -> list[dict]:
    """Each arm's scaled training time beside the record's CPU time."""
    params = record["provenance"]["params"]
    cpu = record["provenance"].get("training_seconds", {})
    epochs = {"wd": params["long_epochs"], "no_wd": params["long_epochs"] - params["branch_epoch"]}
    return [
        {"arm": arm, "epochs": n, "seconds": round(per_epoch * n, 1), "recorded_cpu_seconds": cpu.get(arm)}
        for arm, n in epochs.items()
    ]


# ---------------------------------------------------------------- sweeps


def sweep_conditions(params: SweepsParams) -> list[tuple[Condition, SweepConfig]]:
    """Every condition of both sweeps with its sweep's configuration."""
    plans = [(c, params.config(params.omega_max_epochs)) for c in params.omega_conditions()]
    return plans + [(c, params.config(params.p_max_epochs)) for c in params.p_conditions()]


def step_seconds(cond: Condition, cfg: SweepConfig, n_seeds: int, steps: int, device: torch.device) -> float:
    """Seconds per step of ``n_seeds`` stacked, a ``steps + 1``-step run minus a 1-step run (after a
    1-step run that is not timed)."""
    seeds = [42 + s for s in range(n_seeds)]

    def run(n: int) -> None:
        train_condition(cond, seeds, cfg, max_steps=n, device=device, progress=False)

    run(1)  # warm-up: first kernels, compiled masks, allocator
    return (timed(lambda: run(steps + 1), device) - timed(lambda: run(1), device)) / steps


def scaled_seconds(stops: Sequence[int], full: float, single: float) -> float:
    """A condition's time: its seeds stop after ``stops`` steps; a step of ``n`` running seeds takes
    ``single`` at 1 and ``full`` at ``len(stops)``, linearly between."""
    n_max, done, total = len(stops), 0, 0.0
    for i, stop in enumerate(sorted(stops)):
        running = n_max - i
        rate = single if n_max == 1 else single + (full - single) * (running - 1) / (n_max - 1)
        total += (stop - done) * rate
        done = stop
    return total


def sweep_step_table(params: SweepsParams, steps: int, device: torch.device) -> dict[tuple, tuple[float, float]]:
    """Seconds per step at 12 seeds and at 1, for each (p, batch) shape of the sweeps."""
    table = {}
    for cond, cfg in sweep_conditions(params):
        shape = (cond.p, cond.batch_size)
        if shape not in table:
            table[shape] = tuple(step_seconds(cond, cfg, n, steps, device) for n in (params.n_seeds, 1))
            print(f"  p={shape[0]} B={shape[1] or 'full'}: {table[shape][0] * 1e3:.2f} ms per step of "
                  f"{params.n_seeds} seeds, {table[shape][1] * 1e3:.2f} ms of 1", flush=True)  # fmt: skip
    return table


def sweep_times(record: dict, table: dict[tuple, tuple[float, float]]) -> list[dict]:
    """Each recorded condition's scaled time beside the record's CPU time."""
    params = SweepsParams(**record["provenance"]["params"])
    cpu = record["provenance"].get("training_seconds", {})
    rows = []
    for cond, cfg in sweep_conditions(params):
        key = condition_key(cond, cfg)  # a condition of both sweeps is recorded twice: one stop per seed
        stops = sorted({r["seed"]: r["stopped_at"] for r in record["records"] if r["condition"] == key}.values())
        full, single = table[(cond.p, cond.batch_size)]
        seconds = round(scaled_seconds(stops, full, single), 1)
        rows.append(
            {
                "condition": cond.label(),
                "steps": max(stops),
                "seconds": seconds,
                "recorded_cpu_seconds": cpu.get(cond.label()),
            }
        )
    return rows


def check_condition(record: dict, label: str, table: dict, device: torch.device) -> dict:
    """Train one whole recorded condition; its measured time beside its scaled one."""
    params = SweepsParams(**record["provenance"]["params"])
    found = [(c, cfg) for c, cfg in sweep_conditions(params) if c.label() == label]
    if not found:
        raise SystemExit(
            f"--check: no condition {label!r}; choose one of {[c.label() for c, _ in sweep_conditions(params)]}."
        )
    cond, cfg = found[0]
    seconds = timed(lambda: train_condition(cond, params.seeds, cfg, device=device, progress=False), device)
    scaled = next(r["seconds"] for r in sweep_times(record, table) if r["condition"] == label)
    return {"condition": label, "measured_seconds": round(seconds, 1), "scaled_seconds": scaled}


# ---------------------------------------------------------------- report


def _total(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows]
    return None if any(v is None for v in values) else round(sum(values), 1)


def print_rows(title: str, rows: list[dict], name: str, device: str) -> None:
    print(f"\n{title}")
    for r in rows:
        cpu = r["recorded_cpu_seconds"]
        ratio = f"{cpu / r['seconds']:.1f}x" if cpu and r["seconds"] > 0 else "n/a"
        print(f"  {r[name]:<20} {r['seconds']:>9.1f} s on {device}   recorded CPU {cpu or 'n/a':>8} s   ({ratio})")
    total, cpu = _total(rows, "seconds"), _total(rows, "recorded_cpu_seconds")
    print(f"  {'total':<20} {total:>9.1f} s = {total / 3600:.2f} h   recorded CPU {cpu} s")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm-epochs", type=int, default=100, help="core inflation: epochs before the timed ones "
                    "(a multiple of the run's checkpoint interval, 100)")  # fmt: skip
    ap.add_argument("--epochs", type=int, default=200, help="core inflation: epochs timed")
    ap.add_argument("--steps", type=int, default=100, help="sweeps: steps timed per shape and stack size")
    ap.add_argument(
        "--check", metavar="CONDITION", help='sweeps: also train this whole condition, e.g. "p=53 wd=3 B=512"'
    )
    ap.add_argument("--only", choices=("core_inflation", "grokking_sweeps"), help="time one of the two runs")
    ap.add_argument("--out", type=Path, help="write the times and the machine to this JSON file")
    return ap


def _check_args(args: argparse.Namespace) -> None:
    for name in ("warm_epochs", "epochs", "steps"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}.")
    if args.warm_epochs % 100:
        raise SystemExit(
            f"--warm-epochs must be a multiple of 100 (the run's checkpoint interval), got {args.warm_epochs}."
        )
    if args.out is not None and not args.out.parent.is_dir():
        raise SystemExit(f"--out: the folder {args.out.parent} does not exist; create it or write elsewhere.")


def time_core_inflation(args: argparse.Namespace, device: torch.device) -> dict:
    """The core-inflation slice, scaled to the record's arms; printed, and returned for ``--out``."""
    record = load_recorded("core_inflation")
    params = ModularParams(**record["provenance"]["params"])
    per_epoch = inflation_epoch_seconds(params, args.warm_epochs, args.epochs, device)
    arms = inflation_times(record, per_epoch)
    print_rows("core inflation, paper profile (training)", arms, "arm", str(device))
    return {"seconds_per_epoch": per_epoch, "epochs_timed": args.epochs, "arms": arms}


def time_sweeps(args: argparse.Namespace, device: torch.device) -> dict:
    """The sweeps' step times, scaled to the record's conditions; printed, and returned for ``--out``."""
    record = load_recorded("grokking_sweeps")
    params = SweepsParams(**record["provenance"]["params"])
    table = sweep_step_table(params, args.steps, device)
    out = {
        "steps_timed": args.steps,
        "full_stack_seeds": params.n_seeds,
        "step_seconds": {
            f"p={p} B={b or 'full'}": {"full_stack": v[0], "one_seed": v[1]} for (p, b), v in table.items()
        },
        "conditions": sweep_times(record, table),
    }
    print_rows("grokking sweeps, paper profile", out["conditions"], "condition", str(device))
    if args.check:
        out["check"] = check_condition(record, args.check, table, device)
        print(f"  whole condition: {out['check']}")
    return out


def main(argv: Sequence[str] | None = None) -> dict:
    args = _parser().parse_args(argv)
    _check_args(args)
    device = default_device()
    out = {"machine": device_description(device), "method": "benchmarks/paper_profile_times.py (its docstring)"}
    print(json.dumps(out["machine"]), flush=True)
    if args.only in (None, "core_inflation"):
        out["core_inflation"] = time_core_inflation(args, device)
    if args.only in (None, "grokking_sweeps"):
        out["grokking_sweeps"] = time_sweeps(args, device)
    if args.out is not None:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
