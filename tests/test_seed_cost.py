"""What more seeds of the window would cost (corelib.experiments.paper_scale.window_seed_cost)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from corelib.experiments import paper_scale
from corelib.experiments.inflation_clock_records import Window, WindowArmRun
from corelib.experiments.modular_records import Snapshot
from corelib.results import PROJECT_ROOT, load_json


def _window(seconds: dict[str, float], spans: dict[str, tuple[int, int]], seeds=(1, 2, 3)):
    arms = {
        name: WindowArmRun(None, None if name == "kept" else a, [Snapshot(a, ()), Snapshot(b, ())])
        for name, (a, b) in spans.items()
    }
    return paper_scale.RecordedWindow(
        params=SimpleNamespace(seeds=seeds),
        window=Window(grok_epoch=0, lr=1e-3, wd=1.0, arms=arms),
        branch_run={},
        branch_weights={},
        provenance={"training_seconds": seconds, "machine": {"cpu": "Some CPU", "torch_threads": 2}},
        source="a window",
    )


def _gpu(seconds_per_epoch: float, device: str) -> paper_scale.RecordedGpuTimes:
    """The committed GPU record with its rate and device replaced."""
    gpu = paper_scale.RecordedGpuTimes.from_json(load_json(PROJECT_ROOT / "recorded" / "paper_profile_gpu.json"))
    timing = replace(gpu.core_inflation, seconds_per_epoch=seconds_per_epoch)
    return replace(gpu, core_inflation=timing, machine={**gpu.machine, "device": device})


def test_cpu_time_scales_with_the_seeds_and_gpu_time_with_the_branched_epochs():
    window = _window({"a": 3600.0, "b": 7200.0}, {"kept": (0, 1000), "a": (100, 1000), "b": (500, 1000)})
    gpu = _gpu(0.06, "A GPU (cuda)")
    cost = paper_scale.window_seed_cost(window, gpu, 12)
    assert cost.cpu_hours == pytest.approx(3.0 * 12 / 3)  # 3 hours for 3 seeds, linear in seeds
    assert cost.gpu_minutes == pytest.approx(900 * 0.06 / 60)  # one stack spans epochs 100-1000; kept is not branched
    assert (cost.cpu, cost.gpu) == ("Some CPU, 2 threads", "A GPU (cuda)")
    assert paper_scale.window_seed_cost(window, gpu, 3).gpu_minutes == cost.gpu_minutes  # launch-bound
    assert paper_scale.window_seed_cost(window, None, 12).gpu_minutes is None
    with pytest.raises(ValueError, match="positive whole number"):
        paper_scale.window_seed_cost(window, gpu, 0)


def test_without_a_record_the_glued_cost_says_not_available():
    values = paper_scale.seed_cost_values(None, None, 24)
    assert values["cost_seeds"] == 24 and values["cost_cpu_hours"] == "n/a"


def test_a_gpu_record_without_its_timing_is_refused_naming_the_field():
    stored = load_json(PROJECT_ROOT / "recorded" / "paper_profile_gpu.json")
    timing = stored["core_inflation"]
    for bad, field in (
        ({k: v for k, v in stored.items() if k != "core_inflation"}, "lacks 'core_inflation'"),
        ({**stored, "core_inflation": {**timing, "seconds_per_epoch": -1}}, "seconds_per_epoch = -1"),
        ({**stored, "machine": {}}, "machine = {}"),
    ):
        with pytest.raises(ValueError, match=f"{field}.*restore it from git"):
            paper_scale.RecordedGpuTimes.from_json(bad)
