"""Fixtures shared by several test files, and how the tests share the machine's cores.

Under pytest-xdist (``make test``: ``-n auto --dist loadgroup``) each worker
gets its share of the CPU threads, and every test of the smoke build runs on one worker, so that
the build (the session fixture ``built_book``) is made once.
"""

import copy
import dataclasses
import json
import os
import re
import shutil
from collections.abc import Mapping
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


BOOK_GROUP = "smoke-build"  # the xdist group of the tests that read the smoke build


def pytest_configure(config: pytest.Config) -> None:
    """On a pytest-xdist worker, use this worker's share of the CPUs: torch's threads, and those of
    the processes the tests start (notebook kernels, scripts). With every worker on every core,
    their threads would wait for one another (README: two trainings on two cores)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch

        threads = max(1, (os.cpu_count() or 1) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "built_book" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(BOOK_GROUP))


@pytest.fixture
def one_thread():
    """torch on one thread during the test (the thread count it had, after): where a test compares
    results bit for bit across stack sizes, which a multi-threaded product can round differently."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


STORED_RECORDS = ROOT / "tests" / "stored_records"
"""Records written by an earlier version of corelib, which this one must read and write back byte for byte."""


@pytest.fixture
def stored(request: pytest.FixtureRequest) -> dict:
    """The JSON of the stored record its test module names as ``STORED`` (a file of
    :data:`STORED_RECORDS`), read afresh for each test, which may change its copy."""
    return json.loads(request.module.STORED.read_text())


def edited(stored: dict, path: tuple, *, rename: str | None = None, value: object = None) -> dict:
    """A copy of the JSON ``stored`` (``stored`` itself unchanged) with the key at ``path`` (keys
    and list indices, outermost first) renamed to ``rename``, or else its value set to ``value``."""
    out = copy.deepcopy(stored)
    *parents, key = path
    node = out
    for p in parents:
        node = node[p]
    if rename is None:
        node[key] = value
    else:
        node[rename] = node.pop(key)
    return out


def undocumented(record: type) -> list[str]:
    """The fields of the dataclass ``record`` that its docstring's ``Attributes:`` section does
    not name (every field, where it has no such section)."""
    doc = (record.__doc__ or "").partition("Attributes:")[2]
    return [f.name for f in dataclasses.fields(record) if not re.search(rf"\b{f.name}\b", doc)]


def in_ci(env: Mapping[str, str] = os.environ) -> bool:
    """True in CI ($CI set to anything but "", "0" or "false"): a missing tool then fails its test."""
    return env.get("CI", "").strip().lower() not in ("", "0", "false")


def shared_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder of the whole test run, the same for every pytest-xdist worker."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def smoke_sweeps(tmp_path_factory) -> Path:
    """A results root holding the smoke profile's sweeps (both, every seed), trained once per test run.

    Read it, or copy it (``copy_results``) to write into it. Workers that ask at once take turns
    on each condition's lock (``corelib.results.run_lock``): one trains, the others read it back.
    """
    from acebook.runner import chapter_parameters
    from corelib.experiments.grokking_sweeps import SweepsParams
    from corelib.tasks.sweeps import run_sweep

    root = shared_dir(tmp_path_factory, "smoke_sweeps")
    params = SweepsParams.from_namespace(chapter_parameters("grokking_sweeps", "smoke"))
    mp = pytest.MonkeyPatch()
    mp.setenv("ACE_RESULTS_DIR", str(root))
    try:
        run_sweep(params.omega_conditions(), params.seeds, params.config(params.omega_max_epochs), progress=False)
        run_sweep(params.p_conditions(), params.seeds, params.config(params.p_max_epochs), progress=False)
    finally:
        mp.undo()
    return root


def copy_results(source: Path, dest: Path) -> Path:
    """Copy the results root ``source`` into ``dest`` (created or merged), without its locks."""
    shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".*.lock"))
    return dest


@pytest.fixture(scope="session")
def built_book(tmp_path_factory, smoke_sweeps):
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
    copy_results(smoke_sweeps, root / "results")  # the chapter's smoke sweeps, read back, not trained again
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
        modular_runs.train_arm(params, arm, params.long_epochs, progress=False)
        modular_runs.analyse_arm(params, arm, params.long_epochs, progress=False)
    grokking_sweeps.run(grokking_sweeps.SweepsParams.from_namespace(chapter_parameters("grokking_sweeps", "smoke")))
    for name in ("core_inflation", "grokking_sweeps"):
        record.export(name, "smoke", folder).rename(folder / f"{name}_paper")
