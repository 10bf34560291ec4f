"""What more seeds of the window would cost (corelib.experiments.paper_scale.window_seed_cost)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from corelib.experiments import paper_scale


def _window(seconds: dict[str, float], spans: dict[str, tuple[int, int]], seeds=(1, 2, 3)) -> dict:
    arms = {name: {"records": [{"epoch": a}, {"epoch": b}]} for name, (a, b) in spans.items()}
    return {
        "params": SimpleNamespace(seeds=seeds),
        "provenance": {"training_seconds": seconds, "machine": {"cpu": "Some CPU", "torch_threads": 2}},
        "window": {"arms": arms},
    }


def test_cpu_time_scales_with_the_seeds_and_gpu_time_with_the_branched_epochs():
    window = _window({"a": 3600.0, "b": 7200.0}, {"kept": (0, 1000), "a": (100, 1000), "b": (500, 1000)})
    gpu = {"core_inflation": {"seconds_per_epoch": 0.06}, "machine": {"device": "A GPU (cuda)"}}
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


def test_a_gpu_record_without_its_timing_is_refused():
    from corelib.results import StoreError

    window = _window({"a": 3600.0}, {"kept": (0, 10), "a": (5, 10)})
    for bad in ({}, {"core_inflation": {"seconds_per_epoch": -1}, "machine": {"device": "x"}}):
        with pytest.raises(StoreError, match="restore it from git"):
            paper_scale.window_seed_cost(window, bad, 3)
