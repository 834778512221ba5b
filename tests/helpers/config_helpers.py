"""The package's configuration files as tests edit and read them: a preset written with an edit,
pyproject.toml parsed."""

import yaml
from conftest import REPO

from repro.config import config_dir

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the test extra installs tomli
    import tomli as tomllib


def write_preset(tmp_path, edit):
    data = yaml.safe_load((config_dir() / "presets" / "tiny.yaml").read_text())
    edit(data)
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())
