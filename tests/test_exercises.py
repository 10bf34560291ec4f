"""The coding exercises' solutions, run exactly as printed in the chapters, checked against corelib.

Each chapter has at least one coding exercise whose dropdown solution is a self-contained Python
block. These tests cut that block out of the chapter's jupytext source (so the book can never
show a solution that does not run) and compare what it computes with an independent answer.
The ACE-method chapter's solutions are functions in tests/test_ace.py and tests/test_compare.py,
shown in the book with ``literalinclude``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def solution_code(chapter: str, label: str) -> str:
    """The ```python blocks of the ``{solution} label`` dropdown of ``notebooks/<chapter>.py``."""
    lines = [
        ln[2:] if ln.startswith("# ") else ln.lstrip("#")
        for ln in (ROOT / "notebooks" / f"{chapter}.py").read_text().splitlines()
    ]
    start = next(
        (i for i, ln in enumerate(lines) if re.match(rf"`{{3,}}\{{solution\}} {re.escape(label)}\s*$", ln)), None
    )
    assert start is not None, f"no solution {label!r} in notebooks/{chapter}.py"
    fence = re.match(r"`+", lines[start]).group()
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == fence)
    body, blocks, inside = lines[start + 1 : end], [], None
    for ln in body:
        if inside is None and ln.strip() == "```python":
            inside = []
        elif inside is not None and ln.strip() == "```":
            blocks.append("\n".join(inside))
            inside = None
        elif inside is not None:
            inside.append(ln)
    assert blocks, f"solution {label!r} has no python block"
    return "\n\n".join(blocks)


def run_solution(chapter: str, label: str) -> dict:
    namespace: dict = {}
    exec(compile(solution_code(chapter, label), f"{chapter}:{label}", "exec"), namespace)
    return namespace


def test_markov_spectrum_prediction_matches_the_chain():
    from corelib.tasks.markov import chain_eigenvalues, transition_matrix

    ns = run_solution("markov_chain", "ex-markov-spectrum")
    assert np.allclose(
        np.sort_complex(ns["predicted"]), np.sort_complex(chain_eigenvalues(transition_matrix(0.6, 0.4, 5))), atol=1e-12
    )


def test_markov_oracle_by_simulation_matches_the_closed_form():
    from corelib.tasks.markov import oracle_r2

    ns = run_solution("markov_chain", "ex-markov-oracle")
    assert abs(ns["r2"].mean() - oracle_r2(ns["T"])) < 0.01


def test_planted_clock_has_one_mode_per_frequency_pair():
    ns = run_solution("modular_addition", "ex-modular-modes")
    assert ns["planted_modes"]().tolist() == [3]  # 50 = 53 - 3: the same rotation
    assert ns["planted_modes"](freqs=(3, 7)).tolist() == [3, 7]
    assert ns["planted_modes"](freqs=(5,)).tolist() == [5]


def test_redundant_copies_raise_the_necessary_rank_only():
    ns = run_solution("core_inflation", "ex-inflation-ranks")
    assert [ns["redundancy_ranks"](m) for m in range(1, 6)] == [(m, 1) for m in range(1, 6)]


def test_a_rectified_rotation_needs_its_first_harmonic_too():
    ns = run_solution("core_inflation", "ex-inflation-harmonics")
    assert ns["n"] == 2 and ns["largest"].tolist() == [3, 6]
    var = 0.5 - 2 / math.pi**2  # sum of the squared Fourier coefficients of max(0, cos), without the mean
    assert ns["shares"][2] == pytest.approx(0.25 / var, abs=2e-3)  # the sampling aliases a little
    assert ns["shares"][5] == pytest.approx((2 / (3 * math.pi)) ** 2 / var, abs=2e-3)
    assert ns["rectified_spectrum"](k=5, p=61).argmax() + 1 == 5


def test_power_law_exponent_of_the_ode_curve():
    ns = run_solution("grokking_theory", "grok-ex-exponent")
    # local slope -(1 + x/2 + ...): steeper than -1 near p_crit, -1 far from it
    assert ns["near_exponent"] < -1.3
    assert abs(ns["far_exponent"] + 1) < 0.05
    x = 23 / np.geomspace(300, 3000, 10)
    assert ns["far_exponent"] == pytest.approx(-np.mean(1 + x / 2), abs=0.01)


def test_error_budget_of_the_sweep_checks():
    from scipy.stats import binom

    ns = run_solution("grokking_sweeps", "sweeps-ex-budget")
    brute = [n - min(c for c in range(n + 1) if c / n >= 0.99) for n in (1404, 1405)]
    assert ns["budgets"] == brute == [14, 14]
    exact = sum(math.comb(60, k) * (1 / 53) ** k * (52 / 53) ** (60 - k) for k in range(46, 61))
    assert ns["p_second_chunk"] == pytest.approx(exact, rel=1e-6)
    assert ns["p_second_chunk"] < 1e-60
    assert binom.sf(44, 60, 1 / 53) > ns["p_second_chunk"]  # off by one would be larger


def test_a_missing_solution_is_reported():
    with pytest.raises(AssertionError, match="no solution 'nope'"):
        solution_code("markov_chain", "nope")
