"""profiles/slurm/ against a real SLURM: a single-node cluster (munged, slurmctld, slurmd from
Debian's slurm-wlm and munge, which .ci/run installs) started here in a scratch directory, and
the tiny DAG run through it by snakemake-executor-plugin-slurm to results/table1.csv.

The cluster has no accounting database (no slurmdbd), so the plugin is told to ask squeue and
to submit without an account, as the README says for such clusters."""

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from processes import alive, wait_for
from workflow_helpers import NO_ACCOUNTING, REPO, copy_workflow, failure, snakemake

from repro.analysis.results import table1_experiments
from repro.config import load_experiments, load_preset

pytestmark = pytest.mark.slurm

DAEMONS = ["munged", "slurmctld", "slurmd"]
CLIENTS = ["sbatch", "squeue", "sinfo", "scontrol", "srun"]


def which(name):
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def slurm_conf(root: Path, munge_socket: Path) -> str:
    # The node claims the resources of the profile's biggest request (prepare: 4 CPUs, 16 GB), and
    # config_overrides keeps slurmd from draining it for having less: the jobs are tiny, and the
    # profile is tested as it is. No cgroups (a container may have none to give): processes are
    # tracked by their parent ids and tasks are not bound.
    slurmctld_port, slurmd_port = free_ports(2)
    return f"""\
ClusterName=repro-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={slurmctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
ReturnToService=2
# Finished jobs stay visible to squeue (the plugin's status command here) for 10 minutes.
MinJobAge=600
NodeName=localhost NodeAddr=127.0.0.1 CPUs={max(4, os.cpu_count() or 1)} RealMemory=32000
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def client_wrappers(root: Path, conf: Path) -> Path:
    """A bin/ of the SLURM clients, each the real one with SLURM_CONF set. The plugin's job step
    strips SLURM_* variables (this one too) from the environment of the srun it runs inside each
    job; a real cluster's clients find /etc/slurm/slurm.conf, this scratch one's must be told."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name in CLIENTS:
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\nSLURM_CONF={conf} exec {which(name)} "$@"\n')
        wrapper.chmod(0o755)
    return bin_dir


def stop(pids):
    """SIGTERM each daemon this fixture started (last started first), then SIGKILL laggards."""
    for pid in reversed(pids):
        if alive(pid):
            os.kill(pid, signal.SIGTERM)
            try:
                wait_for(lambda: not alive(pid), 15, f"pid {pid} to exit")
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A running single-node SLURM cluster; SLURM_CONF points the clients (and the workflow's
    snakemake, which inherits the environment) at it."""
    missing = [name for name in DAEMONS + CLIENTS if not which(name)]
    reason = (
        f"SLURM is not installed (no {', '.join(missing)}): apt-get install slurm-wlm munge"
        if missing
        else None
        if os.geteuid() == 0
        else "slurmd must run as root"
    )
    if reason and os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (.ci/run installs SLURM and runs as root)")
    if reason:
        pytest.skip(reason)

    root = tmp_path_factory.mktemp("slurm")
    for name in ("state", "spool"):
        (root / name).mkdir()
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    munge_socket = root / "munge.socket"
    conf = root / "slurm.conf"
    conf.write_text(slurm_conf(root, munge_socket))
    env = {**os.environ, "SLURM_CONF": str(conf)}

    commands = {
        "munged": [
            which("munged"),
            "--force",
            f"--socket={munge_socket}",
            f"--key-file={key}",
            f"--pid-file={root}/munged.pid",
            f"--log-file={root}/munged.log",
            f"--seed-file={root}/munged.seed",
        ],
        "slurmctld": [which("slurmctld"), "-i"],  # -i: ignore any saved state
        "slurmd": [which("slurmd"), "-N", "localhost"],
    }
    pids = []
    try:
        for name in DAEMONS:  # each forks into the background and writes its pid file
            subprocess.run(commands[name], env=env, check=True, capture_output=True, timeout=30)
            pid_file = root / f"{name}.pid"
            wait_for(
                lambda: pid_file.exists() and pid_file.read_text().strip(),
                10,
                f"{pid_file} to appear",
            )
            pids.append(int(pid_file.read_text()))

        def node_idle():
            state = subprocess.run(
                ["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True
            )
            return state.stdout.strip() == "idle"

        wait_for(node_idle, 60, "the node to be idle")
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SLURM_CONF", str(conf))
            patch.setenv("PATH", f"{client_wrappers(root, conf)}{os.pathsep}{os.environ['PATH']}")
            yield root
    except (subprocess.SubprocessError, TimeoutError) as e:
        said = getattr(e, "stderr", None) or b""
        logs = "\n".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for log in root.glob("*.log"))
        pytest.fail(f"could not start the SLURM cluster: {e}\n{said.decode()}\n{logs}")
    finally:
        stop(pids)


def slurm_jobs():
    """{job id: (state, comment)} of every job the cluster remembers (finished ones: MinJobAge)."""
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", "-o", "%i|%T|%k"], capture_output=True, text=True, check=True
    ).stdout
    return {
        job: (state, comment)
        for job, state, comment in (line.split("|", 2) for line in out.splitlines())
    }


def scontrol_job(job_id):
    return subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.slow
def test_tiny_dag_through_slurm(cluster, tmp_path):
    workdir = copy_workflow(tmp_path / "workflow")
    result = snakemake(
        workdir,
        "--profile",
        "profiles/slurm",
        "results/table1.csv",
        "--config",
        "preset=tiny",
        *NO_ACCOUNTING,
        "--slurm-init-seconds-before-status-checks",
        "2",
        "--slurm-keep-successful-logs",
    )
    assert result.returncode == 0, failure(result)

    table = pd.read_csv(workdir / "results" / "table1.csv")
    experiments = load_experiments(REPO / "config" / "experiments.yaml")
    preset = load_preset("tiny", REPO / "config")
    table1 = [e.name for e in table1_experiments(preset, experiments)]
    assert list(table["experiment"]) == table1
    assert set(table["preset"]) == {"tiny"} and set(table["status"]) == {"completed"}

    # Every job was an sbatch job, logged by the plugin under its SLURM job id, that SLURM ran
    # to completion...
    logs = workdir / ".snakemake" / "slurm_logs"
    job_ids = {
        rule: sorted(log.stem for log in (logs / f"rule_{rule}").rglob("*.log"))
        for rule in ("prepare", "indices", "train", "table1")
    }
    assert {rule: len(ids) for rule, ids in job_ids.items()} == {
        "prepare": 1,
        "indices": 1,
        "train": len(table1),
        "table1": 1,
    }
    jobs = slurm_jobs()
    assert sorted(jobs) == sorted(sum(job_ids.values(), [])), jobs
    assert {state for state, _ in jobs.values()} == {"COMPLETED"}, jobs
    assert all(jobs[job][1].startswith("rule_train") for job in job_ids["train"]), jobs

    # ...asking for what the profile and the preset say: a training job the tiny preset's
    # resources (config/presets/tiny.yaml), prepare the profile's set-resources.
    train = scontrol_job(job_ids["train"][0])
    assert "TimeLimit=00:10:00" in train and "mem=2000M" in train, train
    prepare = scontrol_job(job_ids["prepare"][0])
    assert "TimeLimit=08:00:00" in prepare and "mem=16000M" in prepare, prepare
