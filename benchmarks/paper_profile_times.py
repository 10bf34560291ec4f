"""How long the paper profile of core inflation and of the grokking sweeps takes on this machine's
device (a CUDA GPU where there is one), from short slices of the very runs, beside the CPU times the
records hold.

The paper profile trains for hours on a CPU, longer than a borrowed GPU is lent for. So each run is
timed over a slice of its own code path, with the paper's settings (the records' ``params``), and
the slice's rate is scaled to the records' lengths:

- **Core inflation** (:func:`corelib.engine.train_stack`, 3 seeds stacked): seconds per epoch of
  training, with its evaluation every 10 epochs and its snapshots, measured on epochs
  ``warm .. warm + timed`` of the weight-decay arm, a run resumed from its state at ``warm`` (so
  the first kernels and allocations are not counted; loading the state is). Each arm's time is
  that rate times the epochs it trains (20000, and 19100 after the branch at epoch 900); both
  arms run the same step, the other only without weight decay. The slice snapshots every 100
  epochs, as the run does up to epoch 2000 (every 500 after): the scaled time is a little high.
- **Sweeps** (:func:`corelib.tasks.sweeps.train_condition`, 12 seeds stacked): seconds per step, with
  the accuracy checks after every step, for each (p, batch) shape of the record's conditions, at
  12 seeds and at 1 (a seed leaves the stack when it stops). A ``steps``-step run minus a 1-step
  run removes the fixed cost of a condition (data, initialisation). A condition's time is the sum,
  over its recorded steps, of the step time at the number of seeds still running (linear between
  the two measured sizes); weight decay does not change the cost of a step. The slice is the
  start of training, where every accuracy check stops at its first chunk; near the thresholds a
  check reads more chunks, so the scaled time is a little low. ``--check`` trains one whole
  condition and records its measured time beside its scaled one.

The scaled times leave out what the slices do not run: core inflation's snapshot analyses (ACE on
each snapshot, done once after training) and the sweeps' bootstrap fits (seconds).
``--rederive`` also re-derives a sample of each record on this device
(:func:`acebook.record.verify`: core inflation's first ``--rederive-epochs`` epochs, one sweep
condition) and records how it compares. ``--out`` writes everything, with the machine and the
code, as a verified store file (:func:`corelib.results.save_json`); the claims page shows
``recorded/paper_profile_gpu.json`` (:func:`acebook.run_times.gpu_paper_times`).

Run from the project root::

    python benchmarks/paper_profile_times.py                         # the default slices
    python benchmarks/paper_profile_times.py --check "p=53 wd=3 B=512" --rederive \\
        --out recorded/paper_profile_gpu.json                        # on a GPU: the record
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

from acebook.record import compute_device, machine, verify  # noqa: E402
from acebook.run_times import CODE_DIGITS, corelib_hash, git_commit  # noqa: E402
from corelib.agreement import Agreement  # noqa: E402
from corelib.engine import PrefixData, train_stack  # noqa: E402
from corelib.experiments.grokking_sweeps import SweepsParams  # noqa: E402
from corelib.experiments.modular_runs import ModularParams, make_data  # noqa: E402
from corelib.experiments.paper_scale_records import RecordedGpuTimes  # noqa: E402
from corelib.models import default_device  # noqa: E402
from corelib.recorded import load_recorded  # noqa: E402
from corelib.results import save_json  # noqa: E402
from corelib.tasks.sweeps import Condition, SweepConfig, condition_key, train_condition  # noqa: E402


def device_description(device: torch.device) -> dict:
    """The machine (:func:`acebook.record.machine`), the device computed on, and on CUDA the GPU's
    compute capability and the CUDA version."""
    out = {**machine(), "device": compute_device()}
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        out |= {"capability": f"{major}.{minor}", "cuda": torch.version.cuda}
    return out


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a GPU's kernels run after their Python call returns)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def timed(work: Callable[[], object], device: torch.device) -> float:
    """Wall seconds of ``work()``, with the device's queue drained before and after."""
    synchronize(device)
    start = time.perf_counter()
    work()
    synchronize(device)
    return time.perf_counter() - start


# ---------------------------------------------------------------- core inflation


def inflation_epoch_seconds(params: ModularParams, warm: int, timed_epochs: int, device: torch.device) -> float:
    """Seconds per epoch of the weight-decay arm over epochs ``warm .. warm + timed_epochs``, in a
    run resumed from its state at ``warm`` (saved there, the end of the first call)."""
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


def sweeps_params(record: dict) -> SweepsParams:
    """The settings the sweeps' record was made with."""
    return SweepsParams(**record["provenance"]["params"])


def recorded_stops(record: dict) -> dict[str, list[int]]:
    """Each condition's label and the steps after which its seeds stopped, from the record."""
    params = sweeps_params(record)
    stops = {}
    for cond, cfg in params.plans():
        key = condition_key(cond, cfg)  # a condition of both sweeps is recorded twice: one stop per seed
        by_seed = {r["seed"]: r["stopped_at"] for r in record["records"] if r["condition"] == key}
        if sorted(by_seed) != params.seeds:
            raise SystemExit(
                f"the sweeps' record holds seeds {sorted(by_seed)} of {cond.label()}, not {params.seeds}; "
                "restore it with `git checkout -- recorded/grokking_sweeps_paper`."
            )
        stops[cond.label()] = sorted(by_seed.values())
    return stops


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
    for cond, cfg in params.plans():
        shape = (cond.p, cond.batch_size)
        if shape not in table:
            table[shape] = tuple(step_seconds(cond, cfg, n, steps, device) for n in (params.n_seeds, 1))
            print(f"  p={shape[0]} B={shape[1] or 'full'}: {table[shape][0] * 1e3:.2f} ms per step of "
                  f"{params.n_seeds} seeds, {table[shape][1] * 1e3:.2f} ms of 1", flush=True)  # fmt: skip
    return table


def sweep_times(record: dict, table: dict[tuple, tuple[float, float]]) -> list[dict]:
    """Each recorded condition's scaled time beside the record's CPU time."""
    cpu = record["provenance"].get("training_seconds", {})
    stops = recorded_stops(record)
    rows = []
    for cond, _ in sweeps_params(record).plans():
        full, single = table[(cond.p, cond.batch_size)]
        label = cond.label()
        seconds = round(scaled_seconds(stops[label], full, single), 1)
        rows.append(
            {"condition": label, "steps": max(stops[label]), "seconds": seconds, "recorded_cpu_seconds": cpu.get(label)}
        )
    return rows


def check_condition(record: dict, label: str, rows: list[dict], device: torch.device) -> dict:
    """Train one whole recorded condition; its measured time beside its scaled one."""
    params = sweeps_params(record)
    cond, cfg = params.plan(label)
    seconds = timed(lambda: train_condition(cond, params.seeds, cfg, device=device, progress=False), device)
    scaled = next(r["seconds"] for r in rows if r["condition"] == label)
    return {"condition": label, "measured_seconds": round(seconds, 1), "scaled_seconds": scaled}


# ---------------------------------------------------------------- the records re-derived here


def agreement_summary(result: Agreement, seconds: float) -> dict:
    """What the record keeps of a re-derivation's comparison with its record."""
    return {
        "seconds": round(seconds, 1),
        "identical": result.identical,
        "values_moved": [len(result.differences), result.n_values],
        "quantities_moved": [result.n_moved, len(result.quantities)],
        "largest_change_of_a_mean_in_standard_errors": round(result.largest_z, 2),
        "agrees": result.agrees,
    }


def rederive(epochs: int, condition: str) -> dict:
    """Re-derive a sample of both records on this device and compare (:func:`acebook.record.verify`)."""
    out = {}
    for name, kwargs, what in (
        ("core_inflation", {"epochs": epochs}, {"epochs": epochs}),
        ("grokking_sweeps", {"condition": condition}, {"condition": condition}),
    ):
        start = time.perf_counter()
        result = verify(name, **kwargs)
        out[name] = {**what, **agreement_summary(result, time.perf_counter() - start)}
        print(f"  re-derived {name} {what}: {out[name]}", flush=True)
    return out


# ---------------------------------------------------------------- report


def _total(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows]
    return None if any(v is None for v in values) else round(sum(values), 1)


def print_rows(title: str, rows: list[dict], name: str, device: str) -> None:
    """Each row's scaled time on ``device`` beside the record's CPU time, then the totals."""
    print(f"\n{title}")
    for r in rows:
        cpu = r["recorded_cpu_seconds"]
        ratio = f"{cpu / r['seconds']:.1f}x" if cpu and r["seconds"] > 0 else "n/a"
        print(f"  {r[name]:<20} {r['seconds']:>9.1f} s on {device}   recorded CPU {cpu or 'n/a':>8} s   ({ratio})")
    total, cpu = _total(rows, "seconds"), _total(rows, "recorded_cpu_seconds")
    print(f"  {'total':<20} {total:>9.1f} s = {total / 3600:.2f} h   recorded CPU {cpu} s")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm-epochs", type=int, default=100, help="core inflation: epochs before the timed ones")
    ap.add_argument("--epochs", type=int, default=200, help="core inflation: epochs timed")
    ap.add_argument("--steps", type=int, default=100, help="sweeps: steps timed per shape and stack size")
    ap.add_argument(
        "--check", metavar="CONDITION", help='sweeps: also train this whole condition, e.g. "p=53 wd=3 B=512"'
    )
    ap.add_argument("--rederive", action="store_true", help="also re-derive a sample of each record and compare")
    ap.add_argument("--rederive-epochs", type=int, default=1000, help="--rederive: epochs of core inflation")
    ap.add_argument("--rederive-condition", default="p=53 wd=3 B=512", help="--rederive: the sweep condition")
    ap.add_argument("--only", choices=("core_inflation", "grokking_sweeps"), help="time one of the two runs")
    ap.add_argument("--out", type=Path, help="write the times, checks, machine and code to this JSON store file")
    return ap


def _check_args(args: argparse.Namespace) -> None:
    for name in ("warm_epochs", "epochs", "steps", "rederive_epochs"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}.")
    if args.out is not None and not args.out.parent.is_dir():
        raise SystemExit(f"--out: the folder {args.out.parent} does not exist; create it or write elsewhere.")
    if args.out is not None and args.only is not None:
        raise SystemExit("--out records both runs; leave out --only (or --out, to print one run's times).")
    if args.check is not None and args.only == "core_inflation":
        raise SystemExit("--check trains a sweep condition; leave out --only core_inflation.")
    params = sweeps_params(load_recorded("grokking_sweeps"))
    for flag, label in (("--check", args.check), ("--rederive-condition", args.rederive_condition)):
        if label is None:
            continue
        try:
            params.plan(label)
        except ValueError as err:
            raise SystemExit(f"{flag}: {err}") from None


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
    params = sweeps_params(record)
    recorded_stops(record)  # a damaged record is refused before the timing
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
        out["check"] = check_condition(record, args.check, out["conditions"], device)
        print(f"  whole condition: {out['check']}")
    return out


def totals(out: dict) -> dict:
    """Both runs' scaled times and the records' CPU times, summed."""
    arms, conditions = out["core_inflation"]["arms"], out["grokking_sweeps"]["conditions"]
    return {
        "core_inflation": _total(arms, "seconds"),
        "core_inflation_recorded_cpu": _total(arms, "recorded_cpu_seconds"),
        "grokking_sweeps": _total(conditions, "seconds"),
        "grokking_sweeps_recorded_cpu": _total(conditions, "recorded_cpu_seconds"),
    }


def main(argv: Sequence[str] | None = None) -> dict:
    args = _parser().parse_args(argv)
    _check_args(args)
    device = default_device()
    out = {
        "machine": device_description(device),
        "measured": time.strftime("%Y-%m-%d"),
        "code": {
            "commit": git_commit(),
            "corelib": corelib_hash()[:CODE_DIGITS],
            "script": "benchmarks/paper_profile_times.py",
        },
        "precision": "fp32",
    }
    print(json.dumps(out), flush=True)
    if args.only in (None, "core_inflation"):
        out["core_inflation"] = time_core_inflation(args, device)
    if args.only in (None, "grokking_sweeps"):
        out["grokking_sweeps"] = time_sweeps(args, device)
    if args.only is None:
        out["totals_seconds"] = totals(out)
    if args.rederive:
        out["rederived"] = rederive(args.rederive_epochs, args.rederive_condition)
    if args.out is not None:
        RecordedGpuTimes.from_json(out)  # the form the book reads back (paper_scale.recorded_gpu_times)
        save_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
