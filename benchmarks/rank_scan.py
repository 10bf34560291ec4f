"""Seconds per model of the modular analysis' rank scans: batched over ranks vs one hooked run per rank.

``corelib.experiments.modular_runs.analyse_model`` scans core ranks (the necessary and the sufficient
rank) and ``removal_curves`` computes the accuracy at every rank. The intervention is at the last
block's output, at the last position, the only one scored, so everything before it is the same
for every rank: ``corelib.interventions.ReadoutAccuracy`` takes those outputs once and runs only
the unembedding, on many ranks at once. Before it, every rank was one hooked run of the whole
model on the test set (``intervention_accuracy``); that route is timed here side by side, in the
same process, alternating, best of ``--repeats``. Both must give the same analysis record and the
same curves; the script says whether they do.

The model is the book's (two blocks, d_model 128, p = 53), freshly initialised, or a trained
snapshot (``--snapshot``: a run's ``snapshots/epoch_*.safetensors``, read directly and left
untouched). A fresh model's scans stop at their first rank; a trained one's scan further. Run
from the project root::

    python benchmarks/rank_scan.py
    python benchmarks/rank_scan.py --snapshot RUN/wd/snapshots/epoch_002000.safetensors --model 1
    python benchmarks/rank_scan.py --curve-step 8   # the curves at every 8th rank only (quicker)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corelib.engine import SeedStack  # noqa: E402
from corelib.experiments import modular_runs  # noqa: E402
from corelib.interventions import ablation_curve, intervention_accuracy  # noqa: E402
from corelib.models import Transformer, TransformerConfig, resid_hook  # noqa: E402


def load_model(snapshot: Path | None, index: int, params: modular_runs.ModularParams, seed: int) -> Transformer:
    """Model ``index`` of a snapshot (its run's ``run.json`` two folders up), or a fresh one."""
    if snapshot is None:
        torch.manual_seed(seed)
        return Transformer(params.model_config()).eval()
    meta = json.loads((snapshot.parent.parent / "run.json").read_text())
    stack = SeedStack(TransformerConfig(**meta["model"]), meta["seeds"], load_file(snapshot))
    return stack.model(index)


def one_run_per_rank(model_core: Callable) -> Callable:
    """``modular_runs.model_core`` with the accuracy of one hooked whole-model run per core (the old route)."""

    def core(model, data, params):
        h, full, r_energy, _ = model_core(model, data, params)
        hook = resid_hook(params.n_layers - 1)

        def hooked(c, mode):
            return intervention_accuracy(model, *data, hook, c, mode, positions="last", score_positions="last")

        return h, full, r_energy, hooked

    return core


def timed(work: Callable, *args) -> tuple[float, object]:
    """Seconds ``work(*args)`` takes, and what it returns."""
    t0 = time.perf_counter()
    out = work(*args)
    return time.perf_counter() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshot", type=Path, help="a run's snapshots/epoch_*.safetensors (default: a fresh model)")
    ap.add_argument("--model", type=int, default=0, help="which model of the snapshot's stack")
    ap.add_argument("--seed", type=int, default=1031, help="initialisation of the fresh model")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per side (best counts)")
    ap.add_argument("--curve-step", type=int, default=1, help="the curves at every this many ranks")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = ap.parse_args()
    if args.repeats < 1 or args.curve_step < 1:
        ap.error("--repeats and --curve-step must be at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)

    params = modular_runs.ModularParams()
    model = load_model(args.snapshot, args.model, params, args.seed)
    test = modular_runs.make_data(params)["test"]
    sides = {
        "one run per rank": one_run_per_rank(modular_runs.model_core),
        "batched over ranks": modular_runs.model_core,
    }
    print(f"model: {args.snapshot or f'fresh (seed {args.seed})'}, model {args.model}")
    print(
        f"{model.cfg.n_layers} blocks, d_model {model.cfg.d_model}, p = {params.p}, {len(test[0])} test examples, "
        f"{torch.get_num_threads()} threads"
    )
    ranks = list(range(1, model.cfg.d_model + 1, args.curve_step))

    def analysis(model_core: Callable) -> dict:
        # analyse_model looks model_core up in its module: swap in the route being timed.
        batched, modular_runs.model_core = modular_runs.model_core, model_core
        try:
            return modular_runs.analyse_model(model, test, params).to_json()
        finally:
            modular_runs.model_core = batched

    def curves(model_core: Callable) -> dict:
        _, full, _, accuracy = model_core(model, test, params)
        return {mode: ablation_curve(full, accuracy, mode, ranks).tolist() for mode in ("remove", "keep")}

    record = analysis(sides["batched over ranks"])  # also a warm-up: first calls pay for one-off setup
    print(
        "ranks: energy {energy_rank}, necessary {necessary_rank}, sufficient {sufficient_rank}; "
        "test accuracy {test_acc:.3f}".format(**record)
    )
    print(f"\n{'':<30}{'one run per rank':>18}{'batched':>10}{'speed-up':>10}  same result")
    ratios = []
    for name, work in (("analyse_model", analysis), (f"curves at {len(ranks)} ranks, 2 modes", curves)):
        best, results = dict.fromkeys(sides, float("inf")), {}
        for _ in range(args.repeats):  # alternating, so both sides see the same load
            for side, model_core in sides.items():
                seconds, results[side] = timed(work, model_core)
                best[side] = min(best[side], seconds)
        before, after = best.values()
        same = len({json.dumps(r, sort_keys=True) for r in results.values()}) == 1
        ratios.append((before / after, same))
        print(f"{name:<30}{before:>17.2f}s{after:>9.2f}s{before / after:>9.1f}x  {'yes' if same else 'NO'}")
    print(f"speed-up: analyse_model x {ratios[0][0]:.1f}, curves x {ratios[1][0]:.1f}")
    return 0 if all(same for _, same in ratios) else 1


if __name__ == "__main__":
    sys.exit(main())
