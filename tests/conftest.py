"""Fixtures shared by several test files."""

import shutil
from pathlib import Path

import pytest

from acebook import runner
from acebook.run_times import GPU_TIMES_FILE
from corelib.results import copy_file

ROOT = Path(__file__).resolve().parent.parent

# What the book build reads besides the code (corelib and acebook are linked, not copied).
BOOK_FILES = ("_config.yml", "_toc.yml", "profiles.yml", "references.bib")
BOOK_DIRS = ("book", "notebooks", "tests")
WINDOW_RECORD = "inflation_clock_window_paper"


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    """The whole book built with the smoke profile, once per test session.

    The build runs in a copy of the project in a temporary folder, so running the tests never
    replaces a book you built with `make book`. Returns (project copy, its _build/html/index.html).
    """
    root = tmp_path_factory.mktemp("book")
    for name in BOOK_FILES:
        shutil.copy(ROOT / name, root / name)
    for name in BOOK_DIRS:
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("chapters", "*.ipynb"))
    for package in ("corelib", "acebook"):  # the runner hashes their code for its cache
        (root / package).symlink_to(ROOT / package)
    mp = pytest.MonkeyPatch()
    mp.setenv("ACE_RESULTS_DIR", str(root / "results"))
    mp.setenv("ACE_RECORDED_DIR", str(root / "recorded"))
    # The window chapter shows the paper-clock window from its record in every profile.
    shutil.copytree(ROOT / "recorded" / WINDOW_RECORD, root / "recorded" / WINDOW_RECORD)
    # The claims page shows the paper profile's times on a GPU from their record in every profile.
    copy_file(ROOT / "recorded" / GPU_TIMES_FILE, root / "recorded" / GPU_TIMES_FILE)
    try:
        _record_smoke_runs(root / "recorded")
        index = runner.build_book("smoke", root=root)
    finally:
        mp.undo()
    return root, index


def _record_smoke_runs(folder: Path) -> None:
    """Record smoke-profile runs where the chapters read the recorded paper-scale runs.

    The book build then shows them as it shows the paper's, and compares its own snapshots with
    them (the same models, so they must agree). The runs land in the results folder the build
    uses, so the chapters read them back instead of training again.
    """
    from acebook import record
    from acebook.runner import chapter_parameters
    from corelib.experiments import grokking_sweeps, modular_runs

    params = modular_runs.ModularParams.from_namespace(chapter_parameters("core_inflation", "smoke"))
    for arm in modular_runs.ARMS:
        modular_runs.analyse_arm(params, arm, params.long_epochs, progress=False)
    grokking_sweeps.run(grokking_sweeps.SweepsParams.from_namespace(chapter_parameters("grokking_sweeps", "smoke")))
    for name in ("core_inflation", "grokking_sweeps"):
        record.export(name, "smoke", folder).rename(folder / f"{name}_paper")
