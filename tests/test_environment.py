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


EXTRAS = ("lm", "book", "test", "cluster")  # what environment.yml mirrors and the Makefile installs


def pyproject_requirements(extras=EXTRAS) -> dict[str, SpecifierSet]:
    project = pyproject()["project"]
    lines = project["dependencies"] + [line for e in extras for line in project["optional-dependencies"][e]]
    return {canonicalize_name(r.name): r.specifier for r in map(Requirement, lines)}


def constraints() -> dict[str, Requirement]:
    lines = (REPO / "constraints.txt").read_text().splitlines()
    reqs = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    return {canonicalize_name(r.name): r for r in reqs}


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
    """environment.yml states pyproject.toml's range, or the exact version of constraints.txt."""
    ours, conda, pins = pyproject_requirements(), environment_requirements(), constraints()
    differ = {
        n: (str(ours[n]), str(conda[n]))
        for n in ours
        if n in conda and conda[n] != ours[n] and conda[n] != pins[n].specifier
    }
    assert not differ, f"(pyproject.toml, environment.yml) constraints differ: {differ}"


def test_constraints_pin_every_requirement_within_its_range() -> None:
    ours, pins = pyproject_requirements(), constraints()
    missing = sorted(set(ours) - set(pins))
    assert not missing, f"constraints.txt has no pin for {missing}"
    for name, req in pins.items():
        (spec,) = req.specifier
        assert spec.operator == "==", f"constraints.txt must pin {name} exactly, has {req}"
        if name in ours:
            assert ours[name].contains(spec.version), f"{req} is outside pyproject.toml's {name}{ours[name]}"


def test_environment_python_is_supported() -> None:
    python = next(
        e for e in environment()["dependencies"] if isinstance(e, str) and conda_requirement(e).name == "python"
    )
    version = str(next(iter(conda_requirement(python).specifier))).lstrip("=")
    assert SpecifierSet(pyproject()["project"]["requires-python"]).contains(version)


def test_makefile_installs_everything_with_the_constraints() -> None:
    makefile = (REPO / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if "pip install" in line]
    assert installs and all("-c constraints.txt" in line for line in installs), installs
    assert installs[0].split("-c constraints.txt")[1].split()[0] == "torch", "torch is installed first"
    assert any('".[book,lm,test,cluster]"' in line for line in installs)
    assert not any(s.operator == "==" for s in pyproject_requirements()["torch"]), (
        "pyproject.toml must not pin torch exactly: a site's own (e.g. CUDA) build must satisfy it"
    )
