"""Freed CPU memory kept for reuse (corelib.cpu_memory): applied once, by the engine, and only where asked."""

import platform

import pytest
import torch

from corelib import cpu_memory
from corelib.engine import PrefixData, SeedStack, Trainer
from corelib.models import TransformerConfig

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def test_switched_off_by_its_variable_without_touching_malloc(monkeypatch):
    monkeypatch.setenv(cpu_memory.RETAIN_MEMORY_VARIABLE, "0")
    monkeypatch.setattr(cpu_memory, "_applied", None)
    monkeypatch.setattr(cpu_memory, "_set_thresholds", lambda: pytest.fail("malloc was changed"))
    assert cpu_memory.retain_freed_memory() is False


@pytest.mark.skipif(not GLIBC, reason="only glibc has these malloc settings")
def test_applied_once_per_process_on_glibc(monkeypatch):
    monkeypatch.delenv(cpu_memory.RETAIN_MEMORY_VARIABLE, raising=False)
    monkeypatch.setattr(cpu_memory, "_applied", None)
    calls = []
    real = cpu_memory._set_thresholds
    monkeypatch.setattr(cpu_memory, "_set_thresholds", lambda: calls.append(1) or real())
    assert cpu_memory.retain_freed_memory() is True
    assert cpu_memory.retain_freed_memory() is True
    assert calls == [1]


def test_not_applied_where_the_process_has_no_glibc(monkeypatch):
    monkeypatch.setattr(cpu_memory.platform, "libc_ver", lambda: ("", ""))
    assert cpu_memory._set_thresholds() is False


def test_the_engine_applies_it_when_it_trains_on_the_cpu(monkeypatch):
    import corelib.engine as engine

    calls = []
    monkeypatch.setattr(engine, "retain_freed_memory", lambda: calls.append(1) or True)
    cfg = TransformerConfig(vocab_size=7, d_model=8, n_heads=2, d_ff=16, n_layers=1, n_ctx=3)
    data = PrefixData.from_tokens(torch.randint(0, 7, (10, 2)), torch.randint(0, 7, (10,)))
    Trainer(SeedStack.initialise(cfg, [0, 1], "cpu"), data, lr=1e-3, weight_decay=0.0, batch_size=4)
    assert calls == [1]


def test_once_applied_the_settings_are_reported_in_force_even_when_switched_off_later(monkeypatch):
    monkeypatch.setattr(cpu_memory, "_applied", True)
    monkeypatch.setenv(cpu_memory.RETAIN_MEMORY_VARIABLE, "0")
    assert cpu_memory.retain_freed_memory() is True
