"""The workflow's plans that several test files read, each built once a session: the default
config's dry run, the groups' tables at a preset, the workflow given the authors' artefacts."""

from types import SimpleNamespace

import pytest

from repro.config import load_config, resolve_run


@pytest.fixture(scope="session")
def default_plan(tmp_path_factory):
    """The dry run of `all` with the default config and its shell commands (`snakemake -n -p`),
    in a fresh copy of the workflow: one dry run for the tests that read that plan."""
    from workflow_helpers import copy_workflow, snakemake_in_process

    workdir = copy_workflow(tmp_path_factory.mktemp("default-plan"))
    result = snakemake_in_process(workdir, "-n", "-p", "--cores", "1", "all")
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="session")
def group_plans(tmp_path_factory):
    """plan(preset): the plan of a dry run of the groups' tables (the ablation's, decay to
    zero's, version 3's) at that preset and two seeds, in a fresh copy of the workflow: one dry
    run per preset for the tests of every group."""
    from workflow_helpers import GROUP_TABLES, copy_workflow, snakemake_in_process

    plans = {}

    def plan(preset: str) -> str:
        if preset not in plans:
            workdir = copy_workflow(tmp_path_factory.mktemp(f"groups-{preset}"))
            config = ["--config", f"preset={preset}", "seeds=2"]
            result = snakemake_in_process(workdir, "-n", "--cores", "1", *GROUP_TABLES, *config)
            assert result.returncode == 0, result.stdout + result.stderr
            plans[preset] = result.stdout
        return plans[preset]

    return plan


@pytest.fixture(scope="session")
def authors_workflow(tmp_path_factory):
    """The workflow at the tiny preset given the authors' artefacts of the baseline and mlp4.75,
    in a folder whose name holds shell code: the job that finds their runs run, then the dry run
    of `all` with its shell commands. Built once for the tests that read that plan."""
    from authors_helpers import write_artefacts
    from workflow_helpers import copy_workflow, snakemake, snakemake_in_process

    root = tmp_path_factory.mktemp("authors-workflow")
    preset, experiments = load_config("tiny")
    names = ["baseline", "mlp4.75"]
    folder = write_artefacts(
        root / "my $(touch PWNED) drive", {n: resolve_run(preset, experiments[n]) for n in names}
    )
    workdir = copy_workflow(root / "wf")
    config = ["--config", "preset=tiny", f"authors_artefacts={folder}"]
    # Which of their runs there are is found by a job, not while the workflow is parsed.
    found = snakemake(workdir, "--cores", "1", "--until", "authors_runs", *config)
    assert found.returncode == 0, found.stdout + found.stderr
    dry_run = snakemake_in_process(workdir, "-n", "-p", "--cores", "1", "all", *config)
    assert dry_run.returncode == 0, dry_run.stdout + dry_run.stderr
    return SimpleNamespace(root=root, workdir=workdir, folder=folder, names=names, dry_run=dry_run)
