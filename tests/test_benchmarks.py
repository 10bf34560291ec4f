"""The benchmark scripts: their FLOP counter gives known counts, and the scripts run to the end."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import _machine  # noqa: E402
from _machine import counted_flops, mask_seconds  # noqa: E402
from corelib.models import TransformerConfig  # noqa: E402


def test_counted_flops_are_those_of_the_matmuls_run_also_under_vmap():
    a, b = torch.randn(6, 5), torch.randn(5, 7)
    assert counted_flops(lambda: a @ b) == 2 * 6 * 5 * 7
    assert counted_flops(lambda: (a @ b, torch.relu(a), a + 1)) == 2 * 6 * 5 * 7  # elementwise work is not counted
    stacked = torch.randn(4, 6, 5)
    assert counted_flops(lambda: torch.vmap(lambda x: x @ b)(stacked)) == 4 * 2 * 6 * 5 * 7
    w = torch.randn(3, 5, requires_grad=True)
    # backward of x @ w.T: one matmul for the gradient of w (x is not a leaf that needs one)
    assert counted_flops(lambda: (a @ w.T).sum().backward()) == 2 * (2 * 6 * 5 * 3)


def test_mask_seconds_times_the_draws_of_every_batch_for_all_seeds(monkeypatch):
    cfg = TransformerConfig(vocab_size=11, d_model=8, n_heads=2, d_ff=16, n_layers=1, dropout=0.1)
    drawn = []
    real_draw = _machine.DropoutStreams.draw

    def draw(self, model_cfg, batch, length, device):
        drawn.append((len(self.generators), batch, length))
        return real_draw(self, model_cfg, batch, length, device)

    monkeypatch.setattr(_machine.DropoutStreams, "draw", draw)
    assert mask_seconds(cfg, [1, 2], [16, 4], 3, repeats=2) > 0
    assert drawn == [(2, 16, 3), (2, 4, 3)] * 2


@pytest.mark.parametrize(
    "script, args, expect",
    [
        pytest.param("train_throughput.py", ["--epochs", "1"], "the engine's ceiling here", marks=pytest.mark.slow),
        pytest.param(
            "sweep_throughput.py",
            ["--steps", "2", "--seeds", "2", "--plain-seeds", "1"],
            "the engine's ceiling here",
            marks=pytest.mark.slow,
        ),
        pytest.param("sweep_throughput.py", ["--steps", "1"], "--steps must be at least 2", marks=pytest.mark.slow),
        pytest.param(
            "rank_scan.py", ["--curve-step", "32", "--repeats", "1"], "speed-up: analyse_model", marks=pytest.mark.slow
        ),
    ],
)
def test_benchmark_scripts_print_their_ratio_and_ceiling(script, args, expect):
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert expect in run.stdout + run.stderr, run.stderr[-2000:]
    if expect.startswith("--"):
        assert run.returncode == 2
    else:
        assert run.returncode == 0 and "speed-up:" in run.stdout
