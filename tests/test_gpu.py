"""On a CUDA GPU the book computes what it computes on the CPU, within float tolerance: the
engine's training, ACE's moments and extraction, and the language-model path. Marked ``gpu`` and
skipped without CUDA (``make test-gpu`` runs them). ``ACE_TEST_GPU=cpu`` runs them against the CPU
itself, which checks the tests' own code paths on a machine without a GPU."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
import torch

from corelib import ace
from corelib.engine import Arm, PrefixData, StackConfig, load_history, train_mixed, train_stack
from corelib.models import Transformer, TransformerConfig
from corelib.tasks.modular import modular_addition_split

DEVICE = os.environ.get("ACE_TEST_GPU", "cuda")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        DEVICE.startswith("cuda") and not torch.cuda.is_available(), reason="no CUDA GPU on this machine"
    ),
]


def _projector(core) -> np.ndarray:
    return core.basis @ core.basis.T


def test_the_engine_trains_on_the_gpu_as_on_the_cpu(tmp_path):
    cfg = TransformerConfig(vocab_size=11, d_model=32, n_heads=2, d_ff=64, n_layers=1, n_ctx=2, dropout=0.1)
    (x, y), (xt, yt) = modular_addition_split(11, 0.5, 0)
    data = PrefixData.from_tokens(x, y), PrefixData.from_tokens(xt, yt)
    stack_cfg = StackConfig(epochs=5, batch_size=16, snapshot_every=5, checkpoint_every=5)
    runs = {
        device: train_stack(cfg, stack_cfg, (1, 2), *data, tmp_path / device.replace(":", "_"), device=device,
                            progress=False)
        for device in ("cpu", DEVICE)
    }  # fmt: skip
    (cpu, cpu_hist), (gpu, gpu_hist) = runs["cpu"], runs[DEVICE]
    np.testing.assert_allclose(gpu_hist["loss"], cpu_hist["loss"], rtol=1e-4)  # dropout masks are device-free
    # an accuracy may move by one example whose logits tie within rounding
    np.testing.assert_allclose(gpu_hist["test_acc"], cpu_hist["test_acc"], atol=1 / len(xt) + 1e-9)
    for i in range(len(cpu)):  # the trained functions agree
        with torch.no_grad():
            gpu_logits = gpu.model(i).eval()(xt.to(DEVICE))[:, -1].cpu().numpy()
            cpu_logits = cpu.model(i).eval()(xt)[:, -1].numpy()
        np.testing.assert_allclose(gpu_logits, cpu_logits, atol=1e-4)
    for name, value in cpu.params.items():  # and so does every parameter that the loss determines
        keep = _identified(name, value[0], cfg.d_model)
        np.testing.assert_allclose(gpu.params[name][:, keep].cpu().numpy(), value[:, keep].numpy(), atol=1e-4,
                                   err_msg=name)  # fmt: skip
    assert load_history(tmp_path / DEVICE.replace(":", "_"))["epoch"] == cpu_hist["epoch"]


def test_a_mixed_stack_trains_on_the_gpu_as_on_the_cpu(tmp_path):
    # Arms with their own rates and decays, a branch joining at epoch 2 and an arm stopping early:
    # the GPU path of every per-arm piece (groups of AdamW, streams at other draws, leaving arms).
    cfg = TransformerConfig(vocab_size=11, d_model=32, n_heads=2, d_ff=64, n_layers=1, n_ctx=2, dropout=0.1)
    (x, y), (xt, yt) = modular_addition_split(11, 0.5, 0)
    data = PrefixData.from_tokens(x, y), PrefixData.from_tokens(xt, yt)

    def arms(root):
        stack_cfg = StackConfig(epochs=4, batch_size=16, snapshot_every=2, checkpoint_every=2)
        return [
            Arm(stack_cfg, (1, 2), root / "a"),
            Arm(replace(stack_cfg, lr=3e-3, weight_decay=0.0), (1, 2), root / "b", start=(root / "a", 2)),
            Arm(replace(stack_cfg, epochs=3, lr=2e-3, decay_knots=((0, 1.0), (2, 0.0))), (3,), root / "c"),
        ]

    runs = {device: train_mixed(cfg, arms(tmp_path / device.replace(":", "_")), *data, device=device, progress=False)
            for device in ("cpu", DEVICE)}  # fmt: skip
    for (cpu, cpu_hist), (gpu, gpu_hist) in zip(runs["cpu"], runs[DEVICE]):
        assert gpu_hist["epoch"] == cpu_hist["epoch"]
        np.testing.assert_allclose(gpu_hist["loss"], cpu_hist["loss"], rtol=1e-4)
        for name, value in cpu.params.items():
            keep = _identified(name, value[0], cfg.d_model)
            np.testing.assert_allclose(gpu.params[name][:, keep].cpu().numpy(), value[:, keep].numpy(), atol=1e-4,
                                       err_msg=name)  # fmt: skip


def _identified(name: str, value: torch.Tensor, d_model: int) -> torch.Tensor:
    """Which entries of one model's parameter the loss determines. Not the key bias: it adds the
    same ``q . b_k`` to a query's every score, which the softmax removes, so its gradient is zero in
    exact arithmetic and rounding noise on any device; Adam divides that noise by its own running
    size and moves the bias by up to ``lr`` per step, differently on each device
    (``tests/test_models.py::test_the_key_bias_has_no_gradient_but_rounding``)."""
    keep = torch.ones(value.shape[0], dtype=torch.bool)
    if name.endswith("attn.qkv.bias"):
        keep[d_model : 2 * d_model] = False
    return keep


def test_ace_moments_accumulate_on_the_gpu_as_on_the_cpu():
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(400, 24, generator=gen, dtype=torch.float64) @ torch.randn(
        24, 24, generator=gen, dtype=torch.float64
    )
    j = torch.randn(400, 3, 24, generator=gen, dtype=torch.float64)
    cores = {}
    for device in ("cpu", DEVICE):
        acc = ace.MomentAccumulator(24, device=device)
        for rows in torch.split(torch.arange(400), 128):
            acc.update(h_batch=h[rows].to(device), j_batch=j[rows].to(device))
        cores[device] = acc.core(rank=4)
    np.testing.assert_allclose(cores[DEVICE].singular_values, cores["cpu"].singular_values, rtol=1e-8)
    np.testing.assert_allclose(_projector(cores[DEVICE]), _projector(cores["cpu"]), atol=1e-8)


def test_extraction_from_a_model_on_the_gpu_finds_the_cpus_core():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=13, d_model=32, n_layers=2)).eval()
    tokens = torch.randint(0, 13, (96, 6), generator=torch.Generator().manual_seed(1))
    cores = {}
    for device in ("cpu", DEVICE):
        model.to(device)
        cores[device] = ace.extract_from_model(
            model, "blocks.0.hook_resid_post", tokens, lambda out: out[:, -1], rank=3
        )
    np.testing.assert_allclose(cores[DEVICE].singular_values, cores["cpu"].singular_values, rtol=1e-4)
    np.testing.assert_allclose(_projector(cores[DEVICE]), _projector(cores["cpu"]), atol=1e-4)


def test_the_language_model_path_reads_the_same_margins_on_the_gpu():
    from corelib.lm import load_model
    from corelib.tasks.sva import AGREEMENT_READOUT, vocabulary

    prompts = ["The keys to the cabinet", "The key to the cabinets", "The children next to the door"]
    margins = {}
    for device in ("cpu", DEVICE):
        lm = load_model("tiny-random-llama", device, readout=AGREEMENT_READOUT, vocabulary=vocabulary(), verbose=False)
        batch = lm.tokenize(prompts)
        with torch.no_grad():
            full = lm(batch.input_ids, batch.attention_mask, return_type="readout")
            last = lm.last_token(batch, lm.prefix_cache(batch))
        margins[device] = (full.cpu().numpy(), last.cpu().numpy())
    for gpu, cpu in zip(margins[DEVICE], margins["cpu"]):
        np.testing.assert_allclose(gpu, cpu, atol=1e-4)


def test_a_sweep_conditions_checks_read_every_span_on_the_gpu_give_its_per_step_times():
    # The stopping checks kept on the device (DeferredMonitor) against the per-step checks on the
    # same device: only the stack around a seed differs (a stopped seed lingers to the span's end).
    from corelib.tasks.sweeps import Condition, SweepConfig, train_condition
    from tests.test_sweeps import overlap_data

    cfg = SweepConfig(d_model=16, n_heads=2, d_ff=32, lr=1e-2, threshold=0.9, patience_epochs=1, max_epochs=150)
    cond, seeds = Condition(p=11, weight_decay=1.0, batch_size=None), (1, 2, 3)
    data = overlap_data(cond, cfg)
    every_step = train_condition(cond, seeds, cfg, device=DEVICE, progress=False, data=data)
    deferred = train_condition(cond, seeds, cfg, device=DEVICE, progress=False, data=data, sync_every=16)
    for e, d in zip(every_step, deferred):
        # a time may move by a step where an example's logits tie within rounding
        for key in ("t_mem", "t_gen", "stopped_at"):
            assert d[key] is not None and abs(d[key] - e[key]) <= 1, (key, e, d)
        assert d["reason"] == e["reason"] == "patience" and d["final_test_acc"] >= cfg.threshold
