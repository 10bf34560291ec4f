"""Wall time and memory of the subject-verb agreement layer sweep on SmolLM2-135M.

On the paper's 1 200 prompts (600 train, 600 test) it measures

1. **the layer sweep** as the chapter runs it (prefix caches, margin Jacobians at every swept
   layer in one backward pass per batch, a rank-1 core per layer, intervened test margins):
   wall time and peak resident memory above the memory before it (sampled every 20 ms);
2. **Jacobians in one backward pass for all layers versus one pass per layer**, on the first
   ``--ratio-prompts`` training prompts, with the largest difference of the two as a check.

Nothing is asserted about time; other processes on the machine change it. Usage::

    python benchmarks/sva_layer_sweep.py                      # every layer, 1 200 prompts
    python benchmarks/sva_layer_sweep.py --stride 3 --quick   # a few prompts, every 3rd layer
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import numpy as np
import torch

from corelib.experiments import subject_verb_agreement
from corelib.lm import load_model
from corelib.tasks.sva import AGREEMENT_READOUT, make_dataset


def rss() -> int:
    """Resident set size of this process in bytes (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Highest resident set size seen by a polling thread while the block runs."""

    def __init__(self, interval: float = 0.02):
        self.interval = interval
        self.peak = self.start = 0

    def __enter__(self):
        self.start = self.peak = rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss())
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n-per-number", type=int, default=600)
    parser.add_argument("--stride", type=int, default=1, help="sweep every STRIDE-th layer (default: all)")
    parser.add_argument("--modes", nargs="+", default=["remove", "flip"])
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument(
        "--ratio-prompts",
        type=int,
        default=100,
        help="training prompts for the one-pass vs per-layer Jacobian comparison",
    )
    parser.add_argument("--quick", action="store_true", help="20 + 20 prompts, 20 for the ratio")
    args = parser.parse_args()
    if args.quick:
        args.n_per_number, args.ratio_prompts = 20, 20

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"load average {os.getloadavg()[0]:.1f} (other processes make timings noisy)"
    )
    start = time.perf_counter()
    lm = load_model(args.model, readout=AGREEMENT_READOUT)
    print(f"load {args.model}: {time.perf_counter() - start:.1f} s")
    ds = make_dataset(args.n_per_number)
    train, _ = ds.split("train")
    test, plural = ds.split("test")
    layers = subject_verb_agreement.sweep_layers(lm.n_layers, args.stride)

    with PeakRSS() as mem:
        t0 = time.perf_counter()
        cores = subject_verb_agreement.layer_cores(lm, train, layers, batch_size=args.batch_size)
        t1 = time.perf_counter()
        margins = subject_verb_agreement.intervened_margins(
            lm, test, cores, {layer: tuple(args.modes) for layer in layers}, batch_size=args.batch_size
        )
        t2 = time.perf_counter()
    base = subject_verb_agreement.auc(margins["baseline"], plural)
    flip = [subject_verb_agreement.auc(margins[(layer, "flip")], plural) for layer in layers]
    best = layers[int(np.argmax([base - f for f in flip]))]
    print(f"\nlayer sweep: {len(layers)} layers x {len(args.modes)} interventions, {len(train)} + {len(test)} prompts")
    print(f"  cores (prefix + all-layer Jacobians + ACE): {t1 - t0:8.1f} s")
    print(f"  interventions (prefix + {len(layers) * len(args.modes) + 1} last-token passes): {t2 - t1:8.1f} s")
    print(
        f"  total: {t2 - t0:.1f} s; peak RSS {mem.peak / 2**20:.0f} MiB "
        f"(+{(mem.peak - mem.start) / 2**20:.0f} MiB over the {mem.start / 2**20:.0f} MiB before)"
    )
    print(
        f"  baseline AUC {base:.3f}; chosen layer {best} (flip AUC {min(flip):.3f}, "
        f"spectral gap {cores[best].spectral_gap:.3g})"
    )

    sub = train[: args.ratio_prompts]
    batch = lm.tokenize(sub)
    cache = lm.prefix_cache(batch)
    all_layers = list(range(lm.n_layers))
    timings, results = {}, {}
    for one_pass in (True, False):
        t = time.perf_counter()
        jacobians = subject_verb_agreement.all_layer_jacobians(lm, batch, all_layers, cache, one_pass=one_pass)
        results[one_pass] = jacobians[1]
        timings[one_pass] = time.perf_counter() - t
    diff = max(float((results[True][l] - results[False][l]).abs().max()) for l in all_layers)
    print(f"\nJacobians at all {lm.n_layers} layers, {len(sub)} prompts (prefix cached):")
    print(f"  one backward pass:        {timings[True]:8.2f} s")
    print(f"  one pass per layer:       {timings[False]:8.2f} s")
    print(f"  ratio per-layer / one:    {timings[False] / timings[True]:8.1f}x   (largest difference {diff:.1e})")


if __name__ == "__main__":
    main()
