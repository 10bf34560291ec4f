"""A chapter is a name from the table of contents, never a path; the tools never delete or write
a file outside the project and the results folder because of a name they were given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from corelib import claims

ROOT = Path(__file__).resolve().parent.parent
EVIL = """# %% tags=["parameters"]
x = 1

# %%
open("PWNED", "w").write("ran")
"""


def _bait(folder: Path) -> dict[str, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "evil.py").write_text(EVIL)
    for name in ("evil.json", "evil.recorded.json", "evil.ipynb"):
        (folder / name).write_text("precious")
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _ace_book(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "acebook.runner", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("as_given", ["absolute", "relative", "dotted"])
def test_a_path_given_as_a_chapter_is_refused_and_touches_nothing(tmp_path, as_given):
    outside = tmp_path / "elsewhere" / "deep"
    before = _bait(outside)
    name = {
        "absolute": str(outside / "evil"),
        "relative": os.path.relpath(outside / "evil", ROOT),
        "dotted": "../../../../" + str(tmp_path.relative_to("/")) + "/made/here",
    }[as_given]
    env = {**os.environ, "ACE_RESULTS_DIR": str(tmp_path / "results")}
    result = _ace_book("run", name, cwd=ROOT, env=env)
    assert result.returncode == 2, result.stderr
    assert "never a path" in result.stderr and "the chapters: ace_method" in result.stderr
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before  # nothing deleted, written or run
    assert not (tmp_path / "made").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize("command", [["params", "../notebooks/markov_chain"], ["run", "markov_chain.py"]])
def test_every_subcommand_takes_only_names(tmp_path, command):
    env = {**os.environ, "ACE_RESULTS_DIR": str(tmp_path / "results")}
    result = _ace_book(*command, cwd=ROOT, env=env)
    assert result.returncode == 2 and "no chapter" in result.stderr


def test_a_chapter_that_is_not_in_the_table_of_contents_is_refused_with_a_suggestion(tmp_path):
    env = {**os.environ, "ACE_RESULTS_DIR": str(tmp_path / "results")}
    result = _ace_book("run", "markov_chian", cwd=ROOT, env=env)
    assert result.returncode == 2 and "did you mean 'markov_chain'" in result.stderr.lower()


def test_the_claims_store_never_takes_a_path_for_a_chapter(tmp_path):
    before = _bait(tmp_path / "x")
    for bad in (str(tmp_path / "x" / "evil"), "../x/evil", "evil.json", ""):
        with pytest.raises(ValueError, match="never a path"):
            claims.forget_recorded(bad, root=tmp_path / "claims")
        with pytest.raises(ValueError, match="never a path"):
            claims.record(bad, {}, settings={}, root=tmp_path / "claims")
    assert {p.name: p.read_bytes() for p in (tmp_path / "x").iterdir()} == before
