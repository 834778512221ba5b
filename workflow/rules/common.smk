# Configuration checks and the functions the rules share. All of this runs when the workflow is
# parsed, so a bad preset, experiment, value or corpus stops the DAG before any job starts.

import glob
import os
import shlex
from pathlib import Path

from repro.config import CORPORA, RunConfig, load_experiments, load_preset, seed_dir
from repro.config.schema import ConfigError

# The rules and notebooks read presets and experiments from this workflow's config/.
CONFIG_DIR = Path("config")


def checked(load, *args):
    """Call a repro.config loader; a ConfigError (which names the file and key) stops the DAG."""
    try:
        return load(*args)
    except ConfigError as e:
        raise ValueError(f"Invalid configuration: {e}") from None


PRESET = checked(load_preset, config["preset"], CONFIG_DIR)
EXPERIMENTS = checked(load_experiments, None, CONFIG_DIR)
for _name in config["extra_experiments"]:
    checked(EXPERIMENTS.__getitem__, _name)
TABLE1 = [e.name for e in checked(EXPERIMENTS.group, "table1")]
SWEEP = [e.name for e in checked(EXPERIMENTS.group, "figure2")]
DATA = config["data_dir"]
# Seed 0's runs and indices are at the preset's paths; seed k's in a seed<k>/ folder below them.
SEEDS = range(config["seeds"])

if PRESET.corpus == "openwebtext" and config["openwebtext"]["data_files"]:
    if not glob.glob(config["openwebtext"]["data_files"], recursive=True):
        raise ValueError(
            f"Invalid configuration: openwebtext.data_files: no file matches "
            f"{config['openwebtext']['data_files']!r} (the corpus of preset {PRESET.name!r})")


wildcard_constraints:
    preset=r"[A-Za-z0-9_-]+",
    experiment=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    corpus=r"[A-Za-z0-9_-]+",
    seed=r"[1-9][0-9]*",
    rows=r"[1-9][0-9]*",


def preset_of(wildcards):
    """The preset a path names (results/runs/<preset>/..., data/<corpus>/indices/<preset>/)."""
    return checked(load_preset, wildcards.preset, CONFIG_DIR)


def token_files(corpus):
    """What `repro prepare` writes for a corpus (corpus may be the wildcard "{corpus}")."""
    return [f"{DATA}/{corpus}/{name}" for name in ("train.bin", "val.bin", "manifest.json")]


def indices_files(corpus, preset, seed=0, rows=None):
    """What `repro indices` writes for a preset and seed (names or wildcards), next to its
    corpus's tokens; with `rows`, the indices of an experiment whose schedule is not the
    preset's (the authors' untied runs), in rows<R>/ below."""
    folder = seed_dir(f"{DATA}/{corpus}/indices/{preset}", seed)
    folder += f"/rows{rows}" if rows is not None else ""
    return [f"{folder}/{name}"
            for name in ("train.npy", "eval_train.npy", "eval_val.npy", "indices.json")]


def experiment_rows(preset, name):
    """The train rows an experiment needs at a preset when its schedule is longer or shorter
    than the preset's (None when it is the preset's): its max_step + 1."""
    rows = RunConfig(preset, checked(EXPERIMENTS.__getitem__, name)).train.max_step + 1
    return rows if rows != preset.train.max_step + 1 else None


def rows_flag(wildcards):
    """`repro indices --train-rows R` for the rows<R>/ indices."""
    return f"--train-rows {wildcards.rows}" if "rows" in wildcards.keys() else ""


def runs_dir(preset=None):
    """Where the runs of a preset (default: the configured one) are, one folder per experiment."""
    return f"results/runs/{(preset or PRESET).name}"


def run_files(names, preset=None, seeds=(0,)):
    """metrics.csv and run.json of each named run of a preset (default: the configured one), at
    each of `seeds`."""
    return [f"{seed_dir(runs_dir(preset), seed)}/{name}/{file}"
            for seed in seeds for name in names for file in ("metrics.csv", "run.json")]


def seed_of(wildcards):
    """The seed a path names: k for a seed<k>/ folder, else 0."""
    return int(wildcards.get("seed", 0))


def run_folders(names, preset=None, seeds=(0,)):
    """The folders of the named runs of a preset, made if missing: an input of the rules that read
    the runs. Snakemake does not rerun a job whose output is up to date because an input another
    rule makes is missing (it treats it as an intermediate file), but a folder's mtime changes
    when an entry is added or removed: deleting a run's folder makes it newer than the tables,
    which are rebuilt, and so the run is retrained first."""
    folders = [f"{seed_dir(runs_dir(preset), seed)}/{name}" for seed in seeds for name in names]
    for folder in folders:
        os.makedirs(folder, exist_ok=True)
    return folders


def notebook_outputs(**parameters):
    """`-p NAME VALUE` for each parameter of a notebook's own (its output paths...), shell-quoted."""
    return " ".join(f"-p {name} {shlex.quote(str(value))}" for name, value in parameters.items())


def prepare_source(wildcards):
    """The `repro prepare` flags that say where a corpus comes from."""
    if wildcards.corpus == "python-docs":
        return "--python-docs"
    if wildcards.corpus == "openwebtext":
        owt = config["openwebtext"]
        if owt["data_files"]:
            return f"--data-files {shlex.quote(owt['data_files'])}"
        return f"--hub-id {shlex.quote(owt['hub_id'])}"
    raise ValueError(f"unknown corpus {wildcards.corpus!r} ({', '.join(CORPORA)})")


def indices_input(wildcards):
    """The token files and the preset's YAML: indices are redrawn when a preset is edited."""
    preset = preset_of(wildcards)
    if preset.corpus != wildcards.corpus:
        raise ValueError(f"preset {preset.name!r} trains on {preset.corpus!r}, "
                         f"not {wildcards.corpus!r}")
    return {"tokens": token_files(preset.corpus), "preset": preset.source}


def train_input(wildcards):
    preset = preset_of(wildcards)
    rows = experiment_rows(preset, wildcards.experiment)
    return {"tokens": token_files(preset.corpus),
            "indices": indices_files(preset.corpus, preset.name, seed_of(wildcards), rows)}


def train_gpus(wildcards):
    """The `gpu` resources a training job claims: gpus_per_run for a GPU preset, else none."""
    return config["gpus_per_run"] if wildcards.preset in config["gpu_presets"] else 0


def train_command(wildcards):
    """`repro train`, or torchrun starting gpus_per_run ranks of it (src/repro/distributed.py)."""
    ranks = config["gpus_per_run"]
    if ranks == 1:
        return "repro train"
    return f"torchrun --standalone --nproc_per_node {ranks} -m repro train"


def device_flag(wildcards):
    return "" if config["device"] == "auto" else f"--device {config['device']}"


# The one papermill command of every notebook job: the preset, its runs and the config
# directory as parameters, plus that notebook's own (params.outputs: its output paths, and the
# number of seeds where it reads them).
PAPERMILL = (
    "papermill --no-progress-bar --cwd . {input.notebook:q} {output.notebook:q} "
    "-p preset {params.preset:q} -p runs_dir {params.runs:q} -p config_dir {params.config:q} "
    "{params.outputs} > {log:q} 2>&1"
)
