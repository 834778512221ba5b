"""requirements.lock, the exact versions CI tests with (`uv pip compile ... --generate-hashes`,
its first lines give the command), matches pyproject.toml: every dependency of the package and of
its extras is locked at a version its specifier allows. Read offline, from the files alone."""

import re

from config_helpers import pyproject
from conftest import REPO
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

LOCK = REPO / "requirements.lock"
# A pinned line (`name==version \`), and the block of hashes under it up to the next one.
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.M)


def pins() -> dict[str, Version]:
    return {canonicalize_name(n): Version(v) for n, v in PIN.findall(LOCK.read_text())}


def locked_python() -> str:
    """The Python version the lock was compiled for (its command's --python-version)."""
    return re.search(r"--python-version (\S+)", LOCK.read_text())[1]


def direct_requirements() -> list[Requirement]:
    project = pyproject()["project"]
    extras = project.get("optional-dependencies", {}).values()
    return [Requirement(r) for r in [*project["dependencies"], *(r for e in extras for r in e)]]


def test_every_dependency_is_locked_at_a_version_pyproject_allows():
    python = locked_python()
    environment = {
        "python_version": ".".join(python.split(".")[:2]),
        "python_full_version": python,
        "sys_platform": "linux",
        "platform_machine": "x86_64",
    }
    locked, wrong = pins(), []
    for requirement in direct_requirements():
        if requirement.marker and not requirement.marker.evaluate(environment):
            continue  # e.g. tomli, for Pythons older than the lock's
        version = locked.get(canonicalize_name(requirement.name))
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            wrong.append(f"{requirement} (locked: {version or 'missing'})")
    assert not wrong, (
        f"requirements.lock does not match pyproject.toml: {', '.join(wrong)}; compile it again "
        "with the command its first lines give"
    )


def test_the_lock_is_for_a_python_the_package_supports():
    supported = SpecifierSet(pyproject()["project"]["requires-python"])
    assert Version(locked_python()) in supported


def test_every_locked_version_is_pinned_with_its_hashes():
    blocks = re.split(r"\n(?=\S)", LOCK.read_text().split("\n", 2)[2])
    requirements = [b for b in blocks if not b.startswith("#")]
    assert len(requirements) == len(pins()) > 100
    unhashed = [b.split()[0] for b in requirements if "--hash=sha256:" not in b]
    assert not unhashed, unhashed


def test_ci_installs_the_lock_and_the_readme_names_it():
    assert (
        "python -m pip install --no-deps -r requirements.lock\n" in (REPO / ".ci/run").read_text()
    )
    assert "`requirements.lock`" in (REPO / "README.md").read_text()
