"""The benchmark scripts: their FLOP counter gives known counts, their authors'-style model is our
model's architecture, and both scripts run to the end."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import _machine  # noqa: E402
from _machine import ReferenceModel, counted_flops, mask_seconds, reference_model  # noqa: E402
from corelib.experiments.modular import ModularParams  # noqa: E402
from corelib.models import Transformer, TransformerConfig  # noqa: E402
from corelib.sweeps import SweepConfig  # noqa: E402


def test_counted_flops_are_those_of_the_matmuls_run_also_under_vmap():
    a, b = torch.randn(6, 5), torch.randn(5, 7)
    assert counted_flops(lambda: a @ b) == 2 * 6 * 5 * 7
    assert counted_flops(lambda: (a @ b, torch.relu(a), a + 1)) == 2 * 6 * 5 * 7  # elementwise work is not counted
    stacked = torch.randn(4, 6, 5)
    assert counted_flops(lambda: torch.vmap(lambda x: x @ b)(stacked)) == 4 * 2 * 6 * 5 * 7
    w = torch.randn(3, 5, requires_grad=True)
    # backward of x @ w.T: one matmul for the gradient of w (x is not a leaf that needs one)
    assert counted_flops(lambda: (a @ w.T).sum().backward()) == 2 * (2 * 6 * 5 * 3)


def test_counted_flops_see_the_encoder_layers_fused_kernels():
    torch.manual_seed(0)
    model = ReferenceModel(11, 1, d_model=8, n_heads=2, d_ff=16, dropout=0.0)
    b, t, d, d_ff, vocab = 5, 3, 8, 16, 11
    x = torch.randint(0, vocab, (b, t))
    # per token: in-projection, out-projection, MLP, read-out; per sequence: scores and mixing
    expected = b * t * (2 * d * 3 * d + 2 * d * d + 2 * 2 * d * d_ff + 2 * d * vocab) + b * 2 * (2 * t * t * d)
    with torch.no_grad():
        assert counted_flops(lambda: model.eval()(x)) == expected  # the fused inference kernel, unfused to count
        assert counted_flops(lambda: model.train()(x)) == expected  # the CPU flash-attention kernel
    assert torch.backends.mha.get_fastpath_enabled()  # switched back on after counting


@pytest.mark.parametrize(
    "cfg", [ModularParams().model_config(), SweepConfig().model_config(53)], ids=["modular", "sweeps"]
)
def test_reference_model_has_the_parameters_of_our_model(cfg):
    ref = reference_model(cfg.vocab_size, cfg.n_layers, cfg.dropout)
    ours = Transformer(cfg)

    def count(model):
        return sum(p.numel() for p in model.parameters())

    assert count(ref) == count(ours) == {1: 220_085, 2: 418_357}[cfg.n_layers]
    assert sorted(p.shape for p in ref.parameters()) == sorted(p.shape for p in ours.parameters())
    for layer in ref.layers:
        assert not layer.norm_first and layer.linear1.out_features == cfg.d_ff == 512
        assert layer.self_attn.num_heads == cfg.n_heads and layer.dropout.p == cfg.dropout


class _Ops(TorchDispatchMode):
    """Records the names of the operations dispatched."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_reference_model_is_causal_and_evaluates_through_the_fused_kernel():
    torch.manual_seed(0)
    model = ReferenceModel(11, 2, d_model=8, n_heads=2, d_ff=16).eval()
    x = torch.randint(0, 11, (4, 5))
    changed = x.clone()
    changed[:, 2] = (changed[:, 2] + 1) % 11
    with torch.no_grad(), _Ops() as ops:
        a, b = model(x), model(changed)
    torch.testing.assert_close(a[:, :2], b[:, :2])  # earlier positions do not see the change
    assert not torch.allclose(a[:, 2:], b[:, 2:], atol=1e-4)
    assert ops.names.count("_transformer_encoder_layer_fwd") == 4  # two layers, two forwards
    with _Ops() as ops:
        model.train()(x)
    assert "_transformer_encoder_layer_fwd" not in ops.names


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
        assert run.returncode == 0 and "speed-up" in run.stdout
