"""Where a seed-epoch of the modular-addition engine goes: torch.profiler, operators grouped by kind.

Trains the book's modular-addition model (the seeds of ``train_throughput.py``: three stacked,
p = 53, batch 512, dropout 0.1, AdamW) with :func:`corelib.engine.train_stack` for a few epochs
under ``torch.profiler`` on the CPU, and prints the self time of its operators per seed-epoch,
grouped by kind, with each group's share of the profiled time:

- **matmul**: matrix products (``mm``, ``bmm``, ``addmm``, ``linear``, ``matmul``, ``einsum``);
- **attention softmax**: ``softmax`` / ``_softmax`` and their backward;
- **layer norm**: ``native_layer_norm`` and its backward;
- **optimizer**: the AdamW update (``_foreach_*``, ``lerp``, ``addcdiv``, ``sqrt`` ...);
- **masks**: the dropout masks, the whole of the engine's range for them (counter-based random
  bits: one compiled kernel on a CPU, ``bitwise`` operators elsewhere);
- **elementwise**: other arithmetic of the forward and backward (``mul``, ``add``, ``gelu``, ...);
- **copies and shapes**: ``copy_``, ``cat``, ``index``, ``gather``, ``clone``, views, empty tensors;
- **Python and dispatch**: wall time not spent inside any operator.

The first epochs are a warm-up and are not profiled. Run from the project root, one thread so
the shares are those of the timed benchmark::

    OMP_NUM_THREADS=1 python benchmarks/profile_engine.py            # 5 epochs profiled
    OMP_NUM_THREADS=1 python benchmarks/profile_engine.py --epochs 10
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corelib.engine import PrefixData, StackConfig, train_stack  # noqa: E402
from corelib.experiments.modular_runs import ModularParams  # noqa: E402
from corelib.masks import PROFILE_LABEL  # noqa: E402
from corelib.tasks.modular import modular_addition_split  # noqa: E402

GROUPS = (  # first match wins: a name is tested against each group's fragments in this order
    ("attention softmax", ("softmax",)),
    ("layer norm", ("layer_norm",)),
    ("matmul", ("mm", "addmm", "linear", "matmul", "einsum", "baddbmm")),
    ("optimizer", ("_foreach", "lerp", "addcdiv", "addcmul", "adamw", "_fused_adam")),
    ("masks", ("bitwise", "philox", "randint", "where", "shift", "xor", "__and__")),
    ("copies and shapes", ("copy", "cat", "index", "gather", "scatter", "clone", "stack", "contiguous", "_to_")),
    ("copies and shapes", ("view", "select", "strided", "empty", "reshape", "expand", "transpose", "permute")),
    ("copies and shapes", ("slice", "squeeze", "unbind", "split", "detach", "alias", "resize")),
)


def group_of(name: str) -> str:
    """The kind of an operator, from its ``aten::`` name."""
    op = name.split("::")[-1].lower()
    for group, fragments in GROUPS:
        if any(f in op for f in fragments):
            return group
    return "elementwise"


def run(params: ModularParams, epochs: int) -> None:
    """Train the stacked seeds of ``params`` for ``epochs`` epochs, as train_throughput.py's engine side."""
    data = modular_addition_split(params.p, params.train_fraction, params.split_seed, params.split_permutation)
    (x_tr, y_tr), (x_te, y_te) = data
    cfg = StackConfig(
        epochs=epochs,
        batch_size=params.batch_size,
        lr=params.lr,
        weight_decay=params.weight_decay,
        snapshot_every=100,
        checkpoint_every=100,
        eval_every=100,
    )
    train, test = PrefixData.from_tokens(x_tr, y_tr), PrefixData.from_tokens(x_te, y_te)
    with tempfile.TemporaryDirectory() as tmp:
        train_stack(params.model_config(), cfg, list(params.seeds), train, test, Path(tmp), progress=False)


def _under(event, label: str) -> bool:
    """Whether a profiled event runs inside a range named ``label``."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name == label:
            return True
        parent = parent.cpu_parent
    return False


def profile_groups(params: ModularParams, epochs: int) -> tuple[dict[str, float], float]:
    """Self CPU seconds per group over ``epochs`` profiled epochs, and the wall time they took.

    The masks are the whole of the engine's mask range (its operators and its compiled kernel,
    which the profiler does not see as an operator); the other groups are operators outside it.
    """
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        run(params, epochs)
        wall = time.perf_counter() - t0
    seconds: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if event.name == PROFILE_LABEL:
            seconds["masks"] += event.cpu_time_total / 1e6
        elif event.name.startswith("aten::") and not _under(event, PROFILE_LABEL):
            seconds[group_of(event.name)] += event.self_cpu_time_total / 1e6
    return dict(seconds), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=5, help="epochs profiled (after a 2-epoch warm-up)")
    args = ap.parse_args()
    if args.epochs < 1:
        ap.error(f"--epochs must be at least 1, got {args.epochs}")
    params = ModularParams()
    run(params, 2)  # warm-up
    seconds, wall = profile_groups(params, args.epochs)
    seed_epochs = len(params.seeds) * args.epochs
    seconds["Python and dispatch"] = max(0.0, wall - sum(seconds.values()))
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; {len(params.seeds)} seeds x "
        f"{args.epochs} epochs profiled; {1e3 * wall / seed_epochs:.1f} ms per seed-epoch (profiler on)"
    )
    for group, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"  {group:20s} {1e3 * s / seed_epochs:7.2f} ms per seed-epoch  {s / wall:6.1%}")


if __name__ == "__main__":
    main()
