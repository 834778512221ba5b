"""run.json: what a run was (its identity and configuration), on what it ran, and how it ended;
its fields defined once, for training and the results."""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import repro
from repro.errors import ReproError
from repro.files import copy_file, read_json, write_json
from repro.rundir.history import legacy_record, with_later_defaults

RUN_JSON, METRICS_CSV, CHECKPOINT = "run.json", "metrics.csv", "ckpt.pt"
LIVE = "live"  # where `repro train` works in the workflow's run folders (rules/train.smk)
RECORD_FORMAT = "repro-run/2"
FINISHED = ("completed", "diverged")
RECORD_SCHEMA = "run_record.schema.yaml"  # the nested fields' types (RunRecord types the rest)


class RunError(ReproError):
    """A run directory that cannot be (re)started or read as asked; the message names it."""


@dataclass
class RunRecord:
    """run.json. `identity` is RunConfig.identity(); `config` the whole preset and experiment."""

    status: str  # running, completed or diverged (an imported run may have "stopped")
    preset: str
    experiment: str
    identity: dict
    config: dict
    params: dict  # total_params, non_embedding_params
    tokens_per_step: int
    last_step: int | None = None
    diverged_step: int | None = None
    diverged_reason: str | None = None  # what the divergence stop saw (repro.training.run)
    data: dict = field(default_factory=dict)  # token files: dir, source, counts and hashes
    indices: dict = field(default_factory=dict)  # dir and the index files' hashes
    package_version: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    torch_version: str | None = None
    python_version: str | None = None
    device: str | None = None  # on CUDA the GPU's name
    # The CPU's model, the vector unit torch's kernels use, torch's BLAS and math libraries
    # (repro.runtime.machine): what a CPU run's last bits depend on besides the settings below.
    cpu: str | None = None
    cpu_capability: str | None = None
    math_libraries: list | None = None
    cuda_version: str | None = None  # torch's CUDA and cuDNN builds (None without a GPU)
    cudnn_version: int | None = None
    compile: bool | None = None
    compile_mode: str | None = None  # runtime.compile_mode, where compiled
    # torch's deterministic algorithms (runtime.deterministic, repro.runtime.determinism)
    deterministic: bool | None = None
    attention_kernel: str | None = None  # the SDPA backend the attention runs (e.g. MATH)
    fused_projection: bool | None = None
    fused_loss: str | None = None  # the fused loss's kernel (repro, liger); None: not fused
    train_micro_batch: int | None = None
    world_size: int | None = None  # processes (torchrun ranks) of the latest session
    torch_threads: int | None = None  # torch's CPU threads in the latest session
    malloc: str | None = None  # the latest session's C allocator: tcmalloc, glibc-hugepages, glibc
    # The trackers (runtime.trackers) the latest session fed: those dropped left out at its end
    trackers: list | None = None
    # What bit-for-bit equality with an uninterrupted run depends on, per training session
    # (docs/runs.md, "What exact resume means"): the first step, device, threads, versions...
    sessions: list = field(default_factory=list)
    started: str | None = None
    finished: str | None = None
    source: str = "repro"  # "authors": imported by repro.annex.authors.runs, never trained over
    format: str = RECORD_FORMAT

    def session(self) -> dict:
        """One entry of `sessions`: the settings of this process that exactness depends on."""
        keys = ("device", "cpu", "cpu_capability", "torch_threads", "torch_version")
        keys += ("train_micro_batch", "world_size")
        keys += ("compile", "compile_mode", "fused_projection", "fused_loss", "attention_kernel")
        keys += ("deterministic",)
        keys += ("cuda_version", "cudnn_version")
        first = 0 if self.last_step is None else self.last_step + 1
        return {"first_step": first} | {key: getattr(self, key) for key in keys}

    @property
    def finished_training(self) -> bool:
        return self.status in FINISHED

    def write(self, run_dir: Path) -> None:
        write_json(Path(run_dir) / RUN_JSON, asdict(self))


def files_dir(run_dir: str | Path) -> Path:
    """Where a run's files are: the run folder once training has ended, else its live/ folder."""
    run_dir = Path(run_dir)
    if not (run_dir / RUN_JSON).exists() and (run_dir / LIVE / RUN_JSON).exists():
        return run_dir / LIVE
    return run_dir


def has_run(run_dir: str | Path) -> bool:
    files = files_dir(run_dir)
    return (files / RUN_JSON).exists() and (files / METRICS_CSV).exists()


def read_record(run_dir: str | Path) -> RunRecord:
    """run.json of a run directory, in today's layout (repro.rundir.history reads an older one)."""
    path = Path(run_dir) / RUN_JSON
    data = read_json(path, RunError, "has this run been trained?")
    if not isinstance(data, dict):
        raise RunError(f"{path}: not a run record (a {type(data).__name__})")
    if "format" not in data:
        try:
            data = legacy_record(data)
        except (KeyError, TypeError) as e:
            raise RunError(f"{path}: not a run record (no `format`, and no {e})") from None
    known = {f.name: f.type for f in fields(RunRecord)}
    for key, value in data.items():
        if key in known and not _of_type(value, known[key]):
            raise RunError(f"{path}: {key}: {str(value)[:40]!r} is not of type {known[key]}")
    _check_nested(data, path)
    try:  # an identity whose sections are not objects is a TypeError here
        if "identity" in data:
            data["identity"] = with_later_defaults(data["identity"])
        return RunRecord(**{k: v for k, v in data.items() if k in known})
    except TypeError as e:
        raise RunError(f"{path}: not a run record ({e})") from None


def _check_nested(data: dict, path: Path) -> None:
    """The values within run.json's fields that readers use, each of its type where present."""
    from repro.config.schema import ConfigError, validate

    try:
        validate(data, RECORD_SCHEMA, path)
    except ConfigError as e:
        raise RunError(str(e)) from None


TYPES = {"str": str, "int": int, "bool": bool, "dict": dict, "list": list, "None": type(None)}


def _of_type(value, annotation: str) -> bool:
    """Whether a run.json value is of a RunRecord field's type: a wrong one breaks every reader."""
    types = tuple(TYPES[name] for name in annotation.split(" | "))
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def identity_differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two identities (or exist in only one)."""
    keys = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            keys += identity_differences(a, b, f"{prefix}{key}.")
        elif a != b or (key in old) != (key in new):
            keys.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return keys


def publish(run_dir: Path, dest: Path) -> None:
    for name in (METRICS_CSV, RUN_JSON):
        copy_file(Path(run_dir) / name, Path(dest) / name)


def code_version() -> dict:
    """The package version and, in a git checkout, the commit and whether the tree was dirty."""
    src = Path(__file__).resolve().parent

    def git(*args):
        try:
            return subprocess.run(
                ["git", "-C", str(src), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    commit = git("rev-parse", "HEAD")
    return {
        "package_version": repro.__version__,
        "git_commit": commit,
        "git_dirty": bool(git("status", "--porcelain")) if commit else None,
    }
