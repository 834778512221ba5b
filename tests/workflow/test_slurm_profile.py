"""profiles/slurm/ without a cluster: the jobs it would submit at the paper's scale ask for the
preset's resources (a dry run), and a preset's resources are validated."""

import pytest
from conftest import edited_tiny_preset
from workflow_helpers import NO_ACCOUNTING, copy_workflow, snakemake_in_process

from repro.config import load_preset
from repro.config.schema import ConfigError


def test_profile_asks_for_the_presets_resources(tmp_path):
    """Without a cluster: the jobs the profile would submit at the paper's scale (a dry run)."""
    workdir = copy_workflow(tmp_path / "workflow")
    result = snakemake_in_process(
        workdir,
        "-n",
        "--profile",
        "profiles/slurm",
        "results/table1.csv",
        "--config",
        "preset=paper",
        *NO_ACCOUNTING,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    resources = {}
    for block in result.stdout.split("\nrule ")[1:]:
        rule = block.split(":", 1)[0]
        line = next(line for line in block.splitlines() if line.strip().startswith("resources:"))
        resources.setdefault(rule, set()).add(line.split(":", 1)[1].strip())
    assert len(resources["train"]) == 1, resources  # the same for every experiment
    train = dict(item.split("=") for item in resources["train"].pop().split(", "))
    assert (train["gpu"], train["mem_mb"], train["runtime"]) == ("1", "32000", "1440")
    for rule in ("indices", "table1"):
        (line,) = resources[rule]
        assert "mem_mb=4000" in line and "runtime=60" in line and "gpu" not in line, line


def test_preset_resources_are_validated(tmp_path):
    path = edited_tiny_preset(tmp_path, resources={"runtime": "a day"})
    with pytest.raises(ConfigError, match="resources.runtime"):
        load_preset(path)
