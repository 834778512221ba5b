"""The two locks match pyproject.toml: requirements.lock, the exact versions CI tests with (torch's
CPU build), and requirements-cuda.lock, a CUDA node's (torch's CUDA build as PyPI serves it,
Python 3.12), both `uv pip compile ... --generate-hashes` (their first lines give the command).
Every dependency of the package and of the extras a lock's command names (`--all-extras`, or each
`--extra`: the CPU lock leaves out `gpu`, whose Triton kernels need a GPU) is locked at a version
its specifier allows, and
the CUDA lock holds the torch, triton, CUDA and Python the GPU window ran (its raw JSON). Read
offline, from the files alone."""

import json
import re

import pytest
from config_helpers import pyproject
from conftest import REPO
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

LOCKS = ["requirements.lock", "requirements-cuda.lock"]
# The environment of the GPU window the CUDA lock is for (benchmarks/results/gpu-nvidia-h200.md).
WINDOW = REPO / "benchmarks" / "results" / "gpu-nvidia-h200" / "levers.json"
# A pinned line (`name==version \`), and the block of hashes under it up to the next one.
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.M)


def pins(lock: str) -> dict[str, Version]:
    return {canonicalize_name(n): Version(v) for n, v in PIN.findall((REPO / lock).read_text())}


def locked_python(lock: str) -> str:
    """The Python version the lock was compiled for (its command's --python-version)."""
    return re.search(r"--python-version (\S+)", (REPO / lock).read_text())[1]


def locked_extras(lock: str) -> list[str]:
    """The extras the lock was compiled with (its command's --all-extras or --extra NAMEs)."""
    command = (REPO / lock).read_text().split("\n", 2)[1]
    if "--all-extras" in command:
        return list(pyproject()["project"].get("optional-dependencies", {}))
    return re.findall(r"--extra (\S+)", command)


def direct_requirements(extras: list[str]) -> list[Requirement]:
    project = pyproject()["project"]
    named = [project["optional-dependencies"][extra] for extra in extras]
    return [Requirement(r) for r in [*project["dependencies"], *(r for e in named for r in e)]]


def test_the_cpu_lock_has_every_extra_but_the_gpus():
    extras = pyproject()["project"]["optional-dependencies"]
    assert sorted(locked_extras("requirements.lock")) == sorted(set(extras) - {"gpu"})
    assert sorted(locked_extras("requirements-cuda.lock")) == sorted(extras)


@pytest.mark.parametrize("lock", LOCKS)
def test_every_dependency_is_locked_at_a_version_pyproject_allows(lock):
    python = locked_python(lock)
    environment = {
        "python_version": ".".join(python.split(".")[:2]),
        "python_full_version": python,
        "sys_platform": "linux",
        "platform_machine": "x86_64",
    }
    locked, wrong = pins(lock), []
    for requirement in direct_requirements(locked_extras(lock)):
        if requirement.marker and not requirement.marker.evaluate(environment):
            continue  # e.g. tomli, for Pythons older than the lock's
        version = locked.get(canonicalize_name(requirement.name))
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            wrong.append(f"{requirement} (locked: {version or 'missing'})")
    assert not wrong, (
        f"{lock} does not match pyproject.toml: {', '.join(wrong)}; compile it again "
        "with the command its first lines give"
    )


@pytest.mark.parametrize("lock", LOCKS)
def test_the_lock_is_for_a_python_the_package_supports(lock):
    supported = SpecifierSet(pyproject()["project"]["requires-python"])
    assert Version(locked_python(lock)) in supported


@pytest.mark.parametrize("lock", LOCKS)
def test_every_locked_version_is_pinned_with_its_hashes(lock):
    blocks = re.split(r"\n(?=\S)", (REPO / lock).read_text().split("\n", 2)[2])
    requirements = [b for b in blocks if not b.startswith("#")]
    assert len(requirements) == len(pins(lock)) > 100
    unhashed = [b.split()[0] for b in requirements if "--hash=sha256:" not in b]
    assert not unhashed, unhashed


def test_the_cuda_lock_holds_what_the_gpu_window_ran():
    """torch and triton at the window's versions (torch's without its local label: PyPI's wheel is
    `2.11.0`, its torch.__version__ `2.11.0+cu130`), CUDA's runtime at the window's CUDA release,
    the window's Python, and no CPU build of torch."""
    ran = json.loads(WINDOW.read_text())["steps"]["environment"]
    locked = pins("requirements-cuda.lock")
    assert locked["torch"] == Version(Version(ran["torch"]).public)
    assert locked["triton"] == Version(ran["triton"])
    cuda = locked["nvidia-cuda-runtime"]
    assert f"{cuda.major}.{cuda.minor}" == ran["cuda"]
    assert locked_python("requirements-cuda.lock") == ran["python"]
    assert locked["torch"].local is None  # PyPI's CUDA build, not a `+cpu` one


def test_ci_installs_the_lock_and_the_readme_names_both():
    assert (
        "python -m pip install --no-deps -r requirements.lock\n" in (REPO / ".ci/run").read_text()
    )
    readme = (REPO / "README.md").read_text()
    assert "`requirements.lock`" in readme and "`requirements-cuda.lock`" in readme
