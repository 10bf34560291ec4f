"""The command line of the book's runner (``ace-book``, ``python -m acebook.runner``): its parser,
the ``-p`` overrides and ``-f`` parameters files, the checks of its flags, and the commands that
only read or write one file (``list``, ``params``, ``reader``). :func:`acebook.runner.main`
ties them to the commands that execute chapters.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from corelib import untrusted
from corelib.devices import check_device

from .parameters import notebook_parameters, parse_value, yaml_numbers
from .project import ConfigError, chapters, check_chapter_name, output_path, show_path, source_path

__all__ = [
    "MAX_PARAMETERS_FILE",
    "check_device_option",
    "check_not_own_output",
    "check_output",
    "command_parser",
    "file_overrides",
    "parameter_overrides",
    "print_chapters",
    "print_parameters",
    "take_parameters",
    "write_reader_copy",
]


def parameter_overrides(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """The ``-p NAME VALUE`` overrides, a refused value reported with its parameter's name."""
    out = {}
    for name, text in pairs:
        try:
            out[name] = parse_value(text)
        except untrusted.UntrustedError as exc:
            raise ConfigError(f"-p {name}: {exc}") from None
    return out


def command_parser() -> argparse.ArgumentParser:
    """The parser of ``ace-book``: the commands build, run, reader, params and list."""
    parser = argparse.ArgumentParser(
        prog="ace-book",
        description="Execute the book's chapters with a profile's parameters and render the book.",
        epilog="e.g.  ace-book run markov_chain -p epochs 5   |   ace-book build --profile smoke",
    )
    where, how = _where_options(), _how_options()
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    build = sub.add_parser(
        "build",
        parents=[how, where],
        help="execute the chapters of _toc.yml and render the book",
        description="Execute the chapters of _toc.yml (cached ones are reused) and render _build/html.",
    )
    build.add_argument("--only", nargs="+", metavar="NAME", help="execute only these chapters")
    build.add_argument("--no-render", action="store_true", help="do not run jupyter-book")
    run = sub.add_parser(
        "run",
        parents=[how, where],
        help="execute one chapter",
        description="Execute one chapter with the profile's parameters and the overrides.",
    )
    run.add_argument("name", help="the chapter (see `ace-book list`)")
    run.add_argument("-o", "--output", type=Path, help="also write the executed notebook here")
    reader = sub.add_parser(
        "reader",
        help="write the reader's copy of a notebook you executed yourself (numbers in the prose)",
        description=(
            "Write the reader's copy of an executed chapter: its prose with the glued numbers, verdicts "
            "and figures written in, for plain Jupyter. For a chapter you ran live in JupyterLab: save it "
            "as .ipynb, then run this on it."
        ),
    )
    reader.add_argument("notebook", type=Path, help="an executed chapter (.ipynb)")
    reader.add_argument("-o", "--output", type=Path, help="where to write it (default: <notebook>.read.ipynb)")
    _add_listing_commands(sub, where)
    return parser


def _where_options() -> argparse.ArgumentParser:
    """The option every command takes: which checkout."""
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--root", type=Path, default=None, help="project directory (default: the checkout containing acebook)"
    )
    return where


def _how_options() -> argparse.ArgumentParser:
    """The options of the commands that execute chapters: profile, overrides, device, cache."""
    how = argparse.ArgumentParser(add_help=False)
    how.add_argument("--profile", default="book", help="profile of profiles.yml (default: book)")
    how.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="override a parameter; the value is parsed as YAML (build: NAME "
        "applies to every chapter declaring it, NOTEBOOK.NAME to one)",
    )
    how.add_argument(
        "-f",
        "--parameters-file",
        type=Path,
        metavar="YAML",
        help="a YAML mapping of parameter overrides, as papermill's -f (-p values win)",
    )
    how.add_argument(
        "--device",
        help="where the chapters compute: cpu, cuda, cuda:1, mps (default: a GPU when present, else the CPU)",
    )
    how.add_argument("--force", action="store_true", help="re-run even if cached")
    return how


def _add_listing_commands(sub: argparse._SubParsersAction, where: argparse.ArgumentParser) -> None:
    """The commands that only read: a chapter's parameters, the list of chapters."""
    params = sub.add_parser(
        "params",
        parents=[where],
        help="list a chapter's parameters",
        description="List a chapter's parameters: default, type and what it sets.",
    )
    params.add_argument("name", help="the chapter (see `ace-book list`)")
    listing = sub.add_parser(
        "list",
        parents=[where],
        help="list the chapters",
        description="List the chapters of _toc.yml in reading order, with the time of their last execution.",
    )
    listing.add_argument("--profile", default=None, help="show only run times of this profile")


MAX_PARAMETERS_FILE = 1 << 20  # bytes; a parameters file is a few lines


def file_overrides(path: Path | None) -> dict[str, Any]:
    """The overrides of a ``-f`` YAML file: a mapping of parameter names to values. The file is read
    as untrusted (:mod:`corelib.untrusted`): a regular UTF-8 file of at most
    :data:`MAX_PARAMETERS_FILE` bytes, without anchors, aliases or duplicate keys."""
    if path is None:
        return {}
    what = f"the parameters file {path}"
    try:
        data = untrusted.load_yaml(
            untrusted.read_text(path, limit=MAX_PARAMETERS_FILE, what=what, follow_symlinks=True), what
        )
    except untrusted.UntrustedError as exc:
        raise ConfigError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"the parameters file {path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ConfigError(
            f"the parameters file {path} must be a mapping of parameter names to values, e.g. `epochs: 5`."
        )
    return {k: yaml_numbers(v) for k, v in data.items()}


def _title(name: str, root: Path | None) -> str:
    """The chapter's title: the first markdown heading of its source."""
    for line in source_path(name, root).read_text().splitlines():
        if line.startswith("# # "):
            return line[4:].strip()
    return ""


def print_chapters(root: Path | None, profile: str | None) -> None:
    """Print the chapters of ``_toc.yml`` with their titles and last run times (of ``profile``)."""
    from .run_times import recorded_run_times

    times = {r["chapter"]: r for r in recorded_run_times() if profile is None or r.get("profile") == profile}
    names = chapters(root)
    width = max((len(n) for n in names), default=0)
    for name in names:
        t = times.get(name)
        took = f"  [{t['seconds'] / 60:.1f} min, {t.get('profile', '?')}]" if t else ""
        print(f"{name:<{width}}  {_title(name, root)}{took}")


def print_parameters(name: str, root: Path | None) -> None:
    """Print chapter ``name``'s parameters: default, type and what it sets."""
    declared = notebook_parameters(name, root)
    width = max((len(p) for p in declared), default=0)
    for p, info in declared.items():
        kind = info["inferred_type_name"]
        kind = "" if kind == "None" else f"  [{kind}]"
        comment = f"  # {info['help']}" if info["help"] else ""
        print(f"{p:<{width}} = {info['default']}{kind}{comment}")
    if not declared:
        print(f"notebook {name!r} declares no parameters")


def check_device_option(name: str) -> None:
    """``--device``: a device this machine has, or a ConfigError naming the choices."""
    try:
        check_device(name)
    except ValueError as exc:
        raise ConfigError(f"--device: {exc}") from None


def write_reader_copy(notebook: Path, output: Path | None = None) -> Path:
    """Write the reader's copy (:func:`acebook.reader.reader_copy`) of the executed ``notebook`` to
    ``output`` (default: ``<notebook>.read.ipynb`` beside it) and return its path. Refuses a notebook
    that is not a file (a symlink included), an output that exists, and a notebook whose prose cites
    a value it does not hold (one not executed to the end)."""
    import nbformat

    from .claims_page import citation_rows
    from .reader import reader_copy

    notebook = Path(notebook)
    if notebook.is_symlink() or not notebook.is_file() or notebook.suffix != ".ipynb":
        raise ConfigError(f"{notebook}: not a notebook file (.ipynb); name the executed chapter to read.")
    output = Path(output) if output is not None else notebook.with_suffix(".read.ipynb")
    check_output(output)
    if output.exists() or output.is_symlink():
        raise ConfigError(f"-o {output}: exists; choose a new file (nothing is overwritten).")
    try:
        nb = nbformat.read(notebook, as_version=4)
        copy = reader_copy(nb, citation_rows())
    except KeyError as exc:
        raise ConfigError(f"{notebook}: {exc.args[0]}; run every cell of the chapter, then save it.") from None
    except (ValueError, nbformat.reader.NotJSONError) as exc:
        raise ConfigError(f"{notebook}: not a readable notebook ({exc}).") from None
    with tempfile.NamedTemporaryFile("w", dir=output.parent, suffix=".ipynb", delete=False) as tmp:
        nbformat.write(copy, tmp)
    try:
        os.link(tmp.name, output)  # fails rather than replace a file made meanwhile
    except FileExistsError:
        raise ConfigError(f"-o {output}: exists; choose a new file (nothing is overwritten).") from None
    except OSError:  # a file system without hard links: create it exclusively instead
        try:
            with open(output, "x", encoding="utf-8") as out:
                out.write(Path(tmp.name).read_text(encoding="utf-8"))
        except FileExistsError:
            raise ConfigError(f"-o {output}: exists; choose a new file (nothing is overwritten).") from None
    finally:
        os.unlink(tmp.name)
    return output


def check_output(path: Path) -> None:
    """``-o``: a notebook file whose folder exists (or can be made) and can be written."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"-o {path}: that is a folder; name the notebook file to write, e.g. {path / 'out.ipynb'}.")
    if path.suffix != ".ipynb":
        raise ConfigError(f"-o {path}: the executed chapter is a notebook; give the file the suffix .ipynb.")
    folder = next((p for p in (path.parent, *path.parent.parents) if p.exists()), None)
    if folder is None or not folder.is_dir():
        raise ConfigError(f"-o {path}: {folder} is not a folder; choose a path inside a folder.")
    try:  # a real write: permission bits say nothing for root or on a read-only mount
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".ace-book-write-test-"):
            pass
    except OSError as exc:
        raise ConfigError(
            f"-o {path}: cannot write in {folder} ({exc.strerror}); choose a folder you can write to."
        ) from None


def check_not_own_output(path: Path, name: str, root: Path | None) -> None:
    """``-o`` naming the file the runner writes the chapter to anyway: nothing to copy."""
    own = output_path(check_chapter_name(name, root), root)
    same = path.resolve() == own.resolve() or (path.exists() and own.exists() and os.path.samefile(path, own))
    if same:
        raise ConfigError(
            f"-o {path}: the runner writes the executed chapter there already ({show_path(own)}); leave -o out, "
            "or name another file to copy it to."
        )


_PARAMETER_FLAGS = ("-p", "--parameter")


def take_parameters(argv: list[str]) -> tuple[list[str], list[list[str]]]:
    """``argv`` without its ``-p NAME VALUE`` triples, and those pairs. Taken before argparse, which
    would read a value starting with '-' (``-p lr -1e-3``) as an option; the two words after ``-p``
    are its name and value, whatever they look like."""
    rest, pairs, i = [], [], 0
    while i < len(argv):
        if argv[i] == "--":
            rest += argv[i:]
            break
        if argv[i] in _PARAMETER_FLAGS and i + 2 < len(argv) and not argv[i + 1].startswith("-"):
            pairs.append([argv[i + 1], argv[i + 2]])
            i += 3
            continue
        rest.append(argv[i])
        i += 1
    return rest, pairs
