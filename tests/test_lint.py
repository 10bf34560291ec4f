"""The code passes ruff's linter and formatter, as configured in pyproject.toml ([tool.ruff])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["corelib", "acebook", "tests", "benchmarks", "notebooks"]


def ruff(*args: str) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-m", "ruff", *args, *PATHS], cwd=ROOT, capture_output=True, text=True)
    if "No module named ruff" in run.stderr:
        pytest.fail("ruff is not installed: pip install -e '.[test]'")
    return run


def test_ruff_check_passes() -> None:
    run = ruff("check", "--output-format", "concise")
    assert run.returncode == 0, (
        f"ruff check found problems (`ruff check --fix` repairs some):\n{run.stdout}{run.stderr}"
    )


def test_ruff_format_leaves_every_file_unchanged() -> None:
    run = ruff("format", "--check", "--output-format", "concise")
    assert run.returncode == 0, f"files not formatted (run `ruff format`):\n{run.stdout}{run.stderr}"
