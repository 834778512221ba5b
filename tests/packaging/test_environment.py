"""environment.yml (conda) and pyproject.toml (pip) name the same dependencies."""

import re

import yaml
from config_helpers import pyproject
from conftest import REPO

# conda-forge names that differ from the PyPI names pyproject uses
CONDA_TO_PYPI = {"pytorch": "torch"}
NOT_DEPENDENCIES = {"python", "pip"}


def _unconditional(requirements: list[str]) -> list[str]:
    """Leave out requirements with an environment marker: environment.yml pins one Python."""
    return [r for r in requirements if ";" not in r]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_matches_pyproject():
    project = pyproject()["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    wanted |= {_name(r) for r in _unconditional(project["optional-dependencies"]["test"])}

    env = yaml.safe_load((REPO / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert "-e ." in pip, "the pip section installs the package itself"
    names = {CONDA_TO_PYPI.get(_name(d), _name(d)) for d in conda} - NOT_DEPENDENCIES
    names |= {_name(d) for d in pip if not d.startswith("-")}

    assert names - wanted == set(), "in environment.yml but not in pyproject.toml"
    assert "torch==2.13.0" in pip, "the torch the README installs"
    assert wanted - names == set(), "in pyproject.toml but not in environment.yml"


def test_environment_python_is_supported():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    (python,) = [d for d in env["dependencies"] if isinstance(d, str) and _name(d) == "python"]
    required = pyproject()["project"]["requires-python"]
    assert required == ">=3.10" and python.split("=")[-1] >= "3.10"


def test_the_training_path_needs_no_package_a_gpu_node_lacks():
    """A GPU node has no safetensors, lm-eval, datasets or snakemake (docs/gpu.md): the modules
    training, evaluation and the benchmarks import must not need them."""
    import subprocess
    import sys

    absent = ["safetensors", "lm_eval", "datasets", "snakemake", "papermill", "huggingface_hub"]
    code = (
        "import sys\n"
        f"for name in {absent!r}:\n"
        "    sys.modules[name] = None  # importing it raises ImportError\n"
        "import repro.training.run, repro.training.evaluation, repro.cli.assembly\n"
        "import repro.annex.models.generate, repro.annex.perf.bench\n"
    )
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
