"""The book's project files: table of contents, profiles, chapter sources and executed chapters.

Chapters are the ``book/chapters/<name>`` entries of ``_toc.yml``; the source of each is the
jupytext ``py:percent`` script ``notebooks/<name>.py``, and ``profiles.yml`` holds the parameter
values of each profile, ``{profile: {notebook: {param: value}}}``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from corelib.results import PROJECT_ROOT

__all__ = [
    "PARAMETER_CLASSES",
    "check_chapter_name",
    "check_environment",
    "progress_switch",
    "CHAPTER_DIR",
    "PROJECT_ROOT",
    "ConfigError",
    "RunnerError",
    "chapters",
    "did_you_mean",
    "repository_url",
    "PLACEHOLDER_REPOSITORY",
    "output_path",
    "site_source_path",
    "profile_parameters",
    "profiles",
    "project_root",
    "show_path",
    "source_path",
]

CHAPTER_DIR = "book/chapters"
SITE_SOURCE_SUFFIX = ".mystnb"  # a notebook (JSON) that _config.yml's nb_custom_formats reads

# The parameter object each chapter builds from its parameters cell (``X.from_namespace(globals())``):
# the runner builds it too, from the same values, so a value it refuses is refused before a kernel
# starts. ``tests/test_runner.py`` checks that each chapter builds the class named here.
PARAMETER_CLASSES: dict[str, str] = {
    "ace_method": "corelib.experiments.ace_method:AceMethodParams",
    "markov_chain": "corelib.experiments.markov_chain:MarkovParams",
    "modular_addition": "corelib.experiments.modular_runs:ModularParams",
    "core_inflation": "corelib.experiments.modular_runs:ModularParams",
    "grokking_theory": "corelib.experiments.grokking_theory:TheoryParams",
    "grokking_sweeps": "corelib.experiments.grokking_sweeps:SweepsParams",
    "inflation_clock": "corelib.experiments.inflation_clock:ClockParams",
    "interpretability_window": "corelib.experiments.inflation_clock_window:WindowParams",
    "subject_verb_agreement": "corelib.experiments.subject_verb_agreement:SVAParams",
    "own_model": "corelib.experiments.own_model:OwnModelParams",
}


class RunnerError(Exception):
    """Base class of the errors reported to the user without a traceback."""


class ConfigError(RunnerError, ValueError):
    """Bad profile, notebook name, parameter or table of contents."""


def project_root(root: str | os.PathLike | None = None) -> Path:
    """``root`` resolved, or this checkout when None."""
    return Path(root).resolve() if root is not None else PROJECT_ROOT


def show_path(path: Path) -> str:
    """A path as the user should see it: relative to the working directory if inside it."""
    cwd = Path.cwd()
    if cwd != Path(cwd.anchor) and path.is_relative_to(cwd):
        return str(path.relative_to(cwd))
    return str(path)


def read_yaml(path: Path) -> Any:
    """The contents of a YAML file; a missing or malformed file is a :class:`ConfigError`."""
    try:
        return yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path} not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot parse {path}: {exc}") from None


def check_chapter_name(name: str, root: str | os.PathLike | None = None) -> str:
    """``name`` if it is a plain name (letters, digits, ``_``); a path is refused.

    A chapter's name becomes file names in the project and in the results folder (its executed
    notebook, its claims record); a name that is a path would read, write or delete files
    elsewhere, so a name is a plain word, ``notebooks/<name>.py`` (see :func:`source_path`).
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_]+", name):
        known = chapters(root)
        raise ConfigError(
            f"no chapter {name!r} (a chapter is a name from _toc.yml, never a path); the chapters: {', '.join(known)}"
        )
    return name


def source_path(name: str, root: str | os.PathLike | None = None) -> Path:
    """The jupytext source ``notebooks/<name>.py`` of a chapter of ``_toc.yml`` (which must exist)."""
    check_chapter_name(name, root)
    path = project_root(root) / "notebooks" / f"{name}.py"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.py"))
        raise ConfigError(
            f"no notebook {name!r}: {show_path(path)} does not exist{did_you_mean(name, known)} "
            f"(notebooks: {', '.join(known) or 'none'})"
        )
    return path


PLACEHOLDER_REPOSITORY = "https://github.com/ace-book/algorithmic-cores"  # until the book is published


def repository_url(root: str | os.PathLike | None = None) -> str | None:
    """The public repository of the book: ``repository.url`` of ``_config.yml`` (the one setting
    the launch buttons and the Colab install cell are built from); None without a ``_config.yml``."""
    path = project_root(root) / "_config.yml"
    if not path.exists():
        return None
    config = yaml.safe_load(path.read_text()) or {}
    url = (config.get("repository") or {}).get("url")
    if not isinstance(url, str) or not url.startswith("https://"):
        raise ConfigError(f"_config.yml: repository.url must be the book's public https URL, got {url!r}.")
    return url.rstrip("/")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``known`` to a mistyped ``name``, else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def output_path(name: str, root: str | os.PathLike | None = None) -> Path:
    """Where the executed notebook of ``name`` is written, as its reader opens it: the numbers,
    verdicts and figures in its prose (:func:`acebook.reader.reader_copy`)."""
    return project_root(root) / CHAPTER_DIR / f"{name}.ipynb"


def site_source_path(name: str, root: str | os.PathLike | None = None) -> Path:
    """The executed notebook of ``name`` with its MyST roles intact: what the site is rendered from."""
    return project_root(root) / CHAPTER_DIR / f"{name}{SITE_SOURCE_SUFFIX}"


def chapters(root: str | os.PathLike | None = None) -> list[str]:
    """Names of the notebooks listed in ``_toc.yml`` as ``book/chapters/<name>``, in order."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            file = node.get("file")
            if isinstance(file, str) and file.startswith(CHAPTER_DIR + "/"):
                found.append(file[len(CHAPTER_DIR) + 1 :].removesuffix(".ipynb"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(read_yaml(project_root(root) / "_toc.yml"))
    return found


def profiles(root: str | os.PathLike | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """The contents of ``profiles.yml``: ``{profile: {notebook: {param: value}}}``."""
    data = read_yaml(project_root(root) / "profiles.yml") or {}
    if not isinstance(data, dict):
        raise ConfigError("profiles.yml must map profile names to notebooks")
    return {str(p): {str(nb): dict(params or {}) for nb, params in (nbs or {}).items()} for p, nbs in data.items()}


def profile_table(profile: str, root: str | os.PathLike | None = None) -> dict[str, dict[str, Any]]:
    """``{notebook: {param: value}}`` of one profile; an unknown profile or notebook is an error."""
    table = profiles(root)
    if profile not in table:
        raise ConfigError(f"unknown profile {profile!r}; profiles.yml defines: {', '.join(table) or 'no profiles'}")
    for nb in table[profile]:
        if not (project_root(root) / "notebooks" / f"{nb}.py").is_file():
            raise ConfigError(f"profile {profile!r} sets parameters for {nb!r}, but notebooks/{nb}.py does not exist")
    return table[profile]


def profile_parameters(name: str, profile: str, root: str | os.PathLike | None = None) -> dict[str, Any]:
    """Parameters that ``profile`` sets for notebook ``name`` (empty if it sets none)."""
    return dict(profile_table(profile, root).get(name, {}))


# --------------------------------------------------------------------------- environment variables

RESULTS_VARIABLE = "ACE_RESULTS_DIR"  # where runs are stored (empty or unset: results/ in the project)
PROGRESS_VARIABLE = "ACE_PROGRESS"  # forward a chapter's progress bars even when stderr is not a terminal
_ON = ("1", "yes", "true", "on")
_OFF = ("0", "no", "false", "off")


def progress_switch() -> bool | None:
    """``ACE_PROGRESS`` as a switch: True (1, yes, true, on), False (0, no, false, off), any case;
    None when unset or empty. Any other value is a :class:`ConfigError` naming the ones accepted."""
    text = os.environ.get(PROGRESS_VARIABLE, "").strip().lower()
    if not text:
        return None
    if text in _ON + _OFF:
        return text in _ON
    raise ConfigError(
        f"{PROGRESS_VARIABLE}={os.environ[PROGRESS_VARIABLE]!r} is not a switch; set it to one of "
        f"{', '.join(_ON)} (show progress) or {', '.join(_OFF)} (hide it), or unset it."
    )


def _results_folder_problem(text: str) -> str | None:
    """Why the folder ``text`` cannot take the results (None when it can): a file, a missing parent,
    or a folder this process cannot write into (tried, since permission bits say nothing for root
    or on a read-only mount)."""
    import tempfile

    path = Path(text)  # as the store reads it: no ~ expansion there either
    if path.exists() and not path.is_dir():
        return f"{path} is a file, not a folder"
    folder = path if path.is_dir() else path.parent
    if not folder.is_dir():
        return f"its parent folder {folder} does not exist (create it first: mkdir -p {folder})"
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".ace-write-test-"):
            pass
    except OSError as exc:
        return f"cannot write in {folder} ({exc.strerror})"
    return None


def check_environment(*, device: bool = True) -> None:
    """Refuse the book's environment variables as the flags are refused, before any work:
    ``ACE_RESULTS_DIR`` (set and empty: unset; else a folder that exists or whose parent does,
    writable), ``ACE_DEVICE`` (a device this machine has; skipped with ``device=False``, where
    ``--device`` replaces it) and ``ACE_PROGRESS`` (a switch). Raises :class:`ConfigError`."""
    from corelib.devices import DEVICE_VARIABLE, check_device

    results = os.environ.get(RESULTS_VARIABLE, "")
    problem = _results_folder_problem(results) if results else None
    if problem:
        raise ConfigError(
            f"{RESULTS_VARIABLE}={results!r}: {problem}; point it at a folder you can write to, or unset it "
            f"(the results go to {PROJECT_ROOT / 'results'})."
        )
    name = os.environ.get(DEVICE_VARIABLE, "")
    if device and name:
        try:
            check_device(name)
        except ValueError as exc:
            raise ConfigError(f"{DEVICE_VARIABLE}={name!r}: {exc}") from None
    progress_switch()
