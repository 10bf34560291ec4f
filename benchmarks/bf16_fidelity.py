"""Does bf16 training change what the sweeps measure? Grokking times of one condition, fp32 vs bf16.

Trains the same seeds of one grokking-sweep condition (default: the paper's p = 53, weight decay
1, batch 512, 12 seeds) with the engine in fp32 and in bf16 and compares, for each measured
quantity (memorisation step, generalisation step, grokking delay), the bf16 seeds with the fp32
seed distribution: the Mann-Whitney U test (two-sided; statistic and p), the effect size as
Cliff's delta (the probability that a bf16 value exceeds an fp32 one minus the reverse; 0: no
shift, |delta| < 0.33 is conventionally "small") and the ratio of the medians. It also prints
the rate of each precision (seed-steps per second, when it trained rather than read records back).

Records go through the sweeps' store (``ACE_RESULTS_DIR``), so the fp32 records are those of the
paper profile's sweep at the same condition, and a rerun only reads them back. Run from the
project root::

    python benchmarks/bf16_fidelity.py                     # the paper's condition, 12 seeds
    python benchmarks/bf16_fidelity.py --seeds 3 --omega 3 # quicker, fewer seeds
    python benchmarks/bf16_fidelity.py --model modular     # the modular chapters' 2-layer model, 1200 epochs

For the modular model it also compares, at the last epoch, each seed's core dimension and
number of rotational modes (ACE on the final snapshot). ``--out FILE`` writes the comparison
with its provenance (machine, CPU flags, torch, commit, rates) as JSON, e.g. for ``recorded/``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Imported here, not when the results are written: a run of an hour must not meet edited modules.
from acebook.record import machine  # noqa: E402
from acebook.run_times import git_commit  # noqa: E402
from corelib.engine import bf16_native, training_seconds  # noqa: E402
from corelib.experiments import modular_runs as modular  # noqa: E402
from corelib.experiments.grokking_sweeps import SweepsParams  # noqa: E402
from corelib.experiments.modular_runs import ModularParams  # noqa: E402
from corelib.models import default_device  # noqa: E402
from corelib.results import load_json, save_json  # noqa: E402
from corelib.tasks.sweeps import Condition, run_condition  # noqa: E402

QUANTITIES = ("t_mem", "t_gen", "delay")
END_QUANTITIES = ("core_dim", "modes")
"""What the modular model adds at its last epoch: the core ACE finds, and its rotational modes."""


def cliffs_delta(a: np.ndarray, b: np.ndarray) -> float:
    """P(a > b) - P(a < b) over all pairs: Cliff's delta of sample ``a`` against ``b``."""
    diff = np.sign(a[:, None] - b[None, :])
    return float(diff.mean())


def paired(fp32: list[dict], bf16: list[dict], q: str) -> dict[str, float]:
    """The seeds' own shifts: each seed trains from the same weights, data order and dropout masks in
    both precisions, so its bf16 value is paired with its fp32 one. The Wilcoxon signed-rank test
    of the differences (two-sided; W, p; zero differences dropped, p = 1 when all are zero) and
    their median (bf16 - fp32), over the seeds with a value in both."""
    if any(r.get("seed") != s.get("seed") for r, s in zip(fp32, bf16)):
        raise ValueError("the fp32 and bf16 records must list the same seeds in the same order.")
    diff = np.array([s[q] - r[q] for r, s in zip(fp32, bf16) if None not in (r[q], s[q])], dtype=float)
    if not diff.any():
        return {"n_pairs": len(diff), "W": 0.0, "p_paired": 1.0, "median_shift": 0.0}
    test = stats.wilcoxon(diff)
    return {"n_pairs": len(diff), "W": float(test.statistic), "p_paired": float(test.pvalue),
            "median_shift": float(np.median(diff))}  # fmt: skip


def compare(fp32: list[dict], bf16: list[dict], quantities: tuple[str, ...] = QUANTITIES) -> dict[str, dict]:
    """Per quantity: the two samples' medians, Mann-Whitney U and p, Cliff's delta (values missing
    in a seed are left out), and the paired test of the seeds' shifts (:func:`paired`)."""
    out = {}
    for q in quantities:
        a = np.array([r[q] for r in bf16 if r[q] is not None], dtype=float)
        b = np.array([r[q] for r in fp32 if r[q] is not None], dtype=float)
        if len(a) < 2 or len(b) < 2:
            out[q] = {"n_bf16": len(a), "n_fp32": len(b)}
            continue
        test = stats.mannwhitneyu(a, b, alternative="two-sided")
        out[q] = {
            "n_bf16": len(a),
            "n_fp32": len(b),
            "median_bf16": float(np.median(a)),
            "median_fp32": float(np.median(b)),
            "U": float(test.statistic),
            "p": float(test.pvalue),
            "cliffs_delta": cliffs_delta(a, b),
            **paired(fp32, bf16, q),
        }
    return out


def _first_epoch(epochs: list[int], values: list, threshold: float) -> int | None:
    """The first epoch whose value (None: not measured) reaches ``threshold``."""
    return next((e for e, v in zip(epochs, values) if v is not None and v >= threshold), None)


def modular_params(n_seeds: int, precision: str) -> ModularParams:
    """The modular chapters' settings for seeds 1031, 1032, ... (the first three are the paper's)."""
    return replace(ModularParams(), seeds=tuple(range(1031, 1031 + n_seeds)), precision=precision)


def modular_records(n_seeds: int, epochs: int, precision: str) -> list[dict]:
    """Memorisation and grokking epochs of the modular-addition chapters' 2-layer models (seeds
    1031, 1032, ...; the first three are the paper's), trained with weight decay to ``epochs``."""
    params = modular_params(n_seeds, precision)
    modular.train_arm(params, "wd", epochs)
    hist = modular.history(params, "wd", until=epochs)
    out = []
    for i, seed in enumerate(params.seeds):
        train = [row[i] for row in hist["train_acc"]]
        test = [None if row is None else row[i] for row in hist["test_acc"]]
        t_mem = _first_epoch(hist["epoch"], train, params.grok_threshold)
        t_gen = _first_epoch(hist["epoch"], test, params.grok_threshold)
        delay = None if None in (t_mem, t_gen) else t_gen - t_mem
        out.append({"seed": seed, "t_mem": t_mem, "t_gen": t_gen, "delay": delay, "stopped_at": epochs})
    return out


def modular_seconds(n_seeds: int, precision: str) -> float:
    """The seconds :func:`modular_records`' training took, as its run folder recorded them."""
    params = modular_params(n_seeds, precision)
    return training_seconds(modular.arm_dir(params, "wd"))


def modular_end_state(n_seeds: int, epochs: int, precision: str) -> list[dict]:
    """Per seed of :func:`modular_records`' models, the core dimension and the number of rotational
    modes at epoch ``epochs``, the run's horizon (always a snapshot; the models were trained to it)."""
    params = modular_params(n_seeds, precision)
    last = modular.analyse_arm(params, "wd", epochs)[-1]
    return [{"core_dim": m["core_dim"], "modes": len(m["modes"])} for m in last["models"]]


def _provenance(args: argparse.Namespace, rates: dict[str, str]) -> dict:
    return {
        "args": {k: v for k, v in vars(args).items() if k != "out"},  # the settings, not where they went
        "machine": machine(),
        "device": str(default_device()),
        "bf16_native": bf16_native(default_device()),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "commit": git_commit(),
        "finished": time.strftime("%Y-%m-%d %H:%M"),
        "rates": rates,
    }


def _print(result: dict[str, dict]) -> None:
    for q, r in result.items():
        if "U" not in r:
            print(f"{q}: too few seeds with a value (bf16 {r['n_bf16']}, fp32 {r['n_fp32']})")
            continue
        print(
            f"{q:8s}: median fp32 {r['median_fp32']:8.1f}, bf16 {r['median_bf16']:8.1f} "
            f"(ratio {r['median_bf16'] / r['median_fp32']:.3f}); Mann-Whitney U = {r['U']:.1f}, "
            f"p = {r['p']:.3f}; Cliff's delta = {r['cliffs_delta']:+.2f} (n = {r['n_bf16']}, {r['n_fp32']}); "
            f"paired: median shift {r['median_shift']:+.1f}, Wilcoxon W = {r['W']:.1f}, p = {r['p_paired']:.3f}"
        )


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model",
        choices=("sweeps", "modular"),
        default="sweeps",
        help="the sweeps' 1-layer model on one condition, or the modular chapters' 2-layer model (in epochs)",
    )
    ap.add_argument("--epochs", type=int, default=1200, help="--model modular: epochs of training")
    ap.add_argument("--seeds", type=int, default=12, help="models per precision (seeds 42, 43, ...)")
    ap.add_argument("--p", type=int, default=53, help="modulus")
    ap.add_argument("--omega", type=float, default=1.0, help="weight decay")
    ap.add_argument("--batch", type=int, default=512, help="minibatch size (0: full batch)")
    ap.add_argument("--out", type=Path, help="write the comparison and its provenance to this JSON file")
    ap.add_argument("--recompare", type=Path, help="recompute a written comparison from its seeds (no training)")
    return ap


def recompare(path: Path) -> dict[str, dict]:
    """Recompute the comparison of a file ``--out`` wrote from the seeds it keeps, with this
    version's :func:`compare`, and write it back; the provenance names the commit that did."""
    rec = load_json(path)
    quantities = tuple(q for q in (*QUANTITIES, *END_QUANTITIES) if q in rec["comparison"])
    rec["comparison"] = compare(rec["seeds"]["fp32"], rec["seeds"]["bf16"], quantities)
    rec["provenance"]["compared"] = {"commit": git_commit(), "at": time.strftime("%Y-%m-%d %H:%M")}
    save_json(path, rec)
    return rec["comparison"]


def _train(args: argparse.Namespace, precision: str) -> tuple[list[dict], list[dict], str]:
    """One precision's seeds: their records, end states (modular model) and training rate."""
    t0, ends = time.perf_counter(), []
    if args.model == "modular":
        records = modular_records(args.seeds, args.epochs, precision)
    else:
        params = SweepsParams(n_seeds=args.seeds)
        cond = Condition(p=args.p, weight_decay=args.omega, batch_size=args.batch or None)
        cfg = replace(params.config(params.omega_max_epochs), precision=precision)
        records = run_condition(cond, params.seeds, cfg, progress=True)
    elapsed = time.perf_counter() - t0
    if args.model == "modular":
        if elapsed <= 5:  # read back: the store kept the training's time
            elapsed = modular_seconds(args.seeds, precision)
        ends = modular_end_state(args.seeds, args.epochs, precision)
    steps = sum(r["stopped_at"] for r in records)
    unit = "seed-epochs" if args.model == "modular" else "seed-steps"
    rate = f"{steps / elapsed:.1f} {unit}/s" if elapsed > 5 else "read back from the store"
    print(f"{precision}: {steps} {unit} in {elapsed:.1f} s ({rate})")
    return records, ends, rate


def main() -> None:
    ap = _parser()
    args = ap.parse_args()
    if args.recompare is not None:
        _print(recompare(args.recompare))
        return
    if args.seeds < 2:
        ap.error(f"--seeds must be at least 2 for a two-sample test, got {args.seeds}")
    if not bf16_native(default_device()):
        ap.error(
            f"{default_device()} would emulate bf16 (a CPU without AVX512-BF16 or AMX, a GPU before compute "
            "capability 8.0), where the engine refuses it: run the check where the hardware has it"
        )
    if args.model == "modular":
        print(f"the modular chapters' model, {args.seeds} seeds, {args.epochs} epochs (times in epochs)")
    else:
        print(f"condition p={args.p} wd={args.omega:g} B={args.batch or 'full'}, {args.seeds} seeds (times in steps)")
    trained = {precision: _train(args, precision) for precision in ("fp32", "bf16")}
    records = {p: t[0] for p, t in trained.items()}
    result = compare(records["fp32"], records["bf16"])
    if args.model == "modular":
        result.update(compare(trained["fp32"][1], trained["bf16"][1], END_QUANTITIES))
    _print(result)
    if args.out is not None:
        seeds = {p: [{**r, **e} for r, e in zip(t[0], t[1] or [{}] * len(t[0]))] for p, t in trained.items()}
        rates = {p: t[2] for p, t in trained.items()}
        save_json(args.out, {"comparison": result, "seeds": seeds, "provenance": _provenance(args, rates)})
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
