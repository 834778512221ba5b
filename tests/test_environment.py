"""environment.yml (conda) and pyproject.toml (pip) name the same dependencies."""

import re

import tomllib
import yaml
from conftest import REPO

# conda-forge names that differ from the PyPI names pyproject uses
CONDA_TO_PYPI = {"pytorch": "torch"}
NOT_DEPENDENCIES = {"python", "pip"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_matches_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    wanted |= {_name(r) for r in project["optional-dependencies"]["test"]}

    env = yaml.safe_load((REPO / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert "-e ." in pip, "the pip section installs the package itself"
    names = {CONDA_TO_PYPI.get(_name(d), _name(d)) for d in conda} - NOT_DEPENDENCIES
    names |= {_name(d) for d in pip if not d.startswith("-")}

    assert names - wanted == set(), "in environment.yml but not in pyproject.toml"
    assert wanted - names == set(), "in pyproject.toml but not in environment.yml"


def test_environment_python_is_supported():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    (python,) = [d for d in env["dependencies"] if isinstance(d, str) and _name(d) == "python"]
    required = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert required == ">=3.10" and python.split("=")[-1] >= "3.10"
