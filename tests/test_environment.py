"""pyproject.toml, environment.yml and the Makefile must declare the same dependencies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parent.parent
CONDA_ONLY = {"python", "pip"}


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def pyproject_requirements() -> dict[str, SpecifierSet]:
    project = pyproject()["project"]
    lines = project["dependencies"] + project["optional-dependencies"]["test"]
    return {canonicalize_name(r.name): r.specifier for r in map(Requirement, lines)}


def conda_requirement(spec: str) -> Requirement:
    """``numpy>=1.26`` / ``numpy=1.26`` / ``numpy 1.26`` (conda) as a pip requirement."""
    name, rest = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*(.*)", spec).groups()
    rest = rest.replace(" ", "")
    if rest and rest[0].isdigit():
        rest = "==" + rest
    elif rest.startswith("=") and not rest.startswith("=="):
        rest = "=" + rest
    return Requirement(name + rest)


def environment() -> dict:
    return yaml.safe_load((REPO / "environment.yml").read_text())


def environment_requirements() -> dict[str, SpecifierSet]:
    found: dict[str, SpecifierSet] = {}
    for entry in environment()["dependencies"]:
        if isinstance(entry, dict):  # the pip: section
            requirements = [Requirement(line) for line in entry["pip"] if not line.startswith("-")]
        else:
            requirements = [conda_requirement(entry)]
        for req in requirements:
            name = canonicalize_name(req.name)
            assert name not in found, f"{name} is listed twice in environment.yml"
            found[name] = req.specifier
    return {n: s for n, s in found.items() if n not in CONDA_ONLY}


def test_same_packages() -> None:
    ours, conda = pyproject_requirements(), environment_requirements()
    assert sorted(ours) == sorted(conda), (
        f"only in pyproject.toml: {sorted(set(ours) - set(conda))}; "
        f"only in environment.yml: {sorted(set(conda) - set(ours))}"
    )


def test_same_version_constraints() -> None:
    ours, conda = pyproject_requirements(), environment_requirements()
    differ = {n: (str(ours[n]), str(conda[n])) for n in ours if n in conda and ours[n] != conda[n]}
    assert not differ, f"(pyproject.toml, environment.yml) constraints differ: {differ}"


def test_environment_python_is_supported() -> None:
    python = next(
        e for e in environment()["dependencies"] if isinstance(e, str) and conda_requirement(e).name == "python"
    )
    version = str(next(iter(conda_requirement(python).specifier))).lstrip("=")
    assert SpecifierSet(pyproject()["project"]["requires-python"]).contains(version)


def test_makefile_installs_the_pinned_torch() -> None:
    pinned = [str(s) for s in pyproject_requirements()["torch"] if s.operator == "=="]
    assert pinned, "torch must be pinned with == in pyproject.toml"
    assert f'"torch{pinned[0]}"' in (REPO / "Makefile").read_text()
