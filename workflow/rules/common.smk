# Configuration checks and the functions the rules share (those of the authors' and the audit's
# rules: annex/common.smk). The checks run when the workflow is parsed, so a bad preset, experiment, value
# or corpus stops the DAG before any job starts; the functions run while the job graph is built.
# None of it writes a file (`snakemake -n` leaves the tree as it was).

import difflib
import functools
import glob
import os
import re
import shlex
from pathlib import Path

from snakemake.logging import logger

from repro.analysis.kept_apart import keep_apart
from repro.config import CORPORA, load_experiments, load_preset, resolve_run, seed_dir
from repro.config.plan import SWEEP_GROUP, TABLE1_GROUP, planned_runs, table1_experiments
from repro.config.schema import ConfigError
from repro.rundir import CHECKPOINT, LIVE

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
# The runs `all` trains (experiment, seed, folder), planned by the library, which `repro status`
# reads too: what the DAG trains is what it lists. An unknown extra experiment stops the DAG.
PLANNED_RUNS = checked(
    planned_runs, PRESET, EXPERIMENTS, config["seeds"], config["extra_experiments"]
)
TABLE1 = [e.name for e in checked(EXPERIMENTS.group, TABLE1_GROUP)]
# ... and the runs its table reads: at a preset with report.equal_rate also the linear query at the
# nonlinear query's learning rate, which the rate's share of the gap needs (repro.config.plan).
TABLE1_RUNS = [e.name for e in table1_experiments(PRESET, EXPERIMENTS)]
SWEEP = [e.name for e in checked(EXPERIMENTS.group, SWEEP_GROUP)]
DATA = config["data_dir"]
# Seed 0's runs and indices are at the preset's paths; seed k's in a seed<k>/ folder below them.
SEEDS = range(config["seeds"])

if PRESET.corpus == "openwebtext" and config["openwebtext"]["data_files"]:
    if not glob.glob(config["openwebtext"]["data_files"], recursive=True):
        raise ValueError(
            f"Invalid configuration: openwebtext.data_files: no file matches "
            f"{config['openwebtext']['data_files']!r} (the corpus of preset {PRESET.name!r})"
        )


wildcard_constraints:
    preset=r"[A-Za-z0-9_-]+",
    experiment=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    corpus="|".join(CORPORA),
    seed=r"[1-9][0-9]*",
    rows=r"[1-9][0-9]*",


def preset_of(wildcards):
    """The preset a path names (results/runs/<preset>/..., data/<corpus>/indices/<preset>/)."""
    return preset_named(wildcards.preset)


@functools.cache
def preset_named(name):
    """A preset of this workflow's config/, read and checked once however many jobs name it."""
    return checked(load_preset, name, CONFIG_DIR)


def token_files(corpus):
    """What `repro prepare` writes for a corpus (corpus may be the wildcard "{corpus}")."""
    return [f"{DATA}/{corpus}/{name}" for name in ("train.bin", "val.bin", "manifest.json")]


def indices_files(corpus, preset, seed=0, rows=None):
    """What `repro indices` writes for a preset and seed (names or wildcards), next to its
    corpus's tokens; with `rows`, the indices of an experiment whose schedule is not the
    preset's (the authors' untied runs), in rows<R>/ below."""
    folder = seed_dir(f"{DATA}/{corpus}/indices/{preset}", seed)
    folder = os.path.join(folder, f"rows{rows}") if rows is not None else folder
    return [
        f"{folder}/{name}"
        for name in ("train.npy", "eval_train.npy", "eval_val.npy", "indices.json")
    ]


def experiment_rows(preset, name):
    """The train rows an experiment needs at a preset when its schedule is longer or shorter
    than the preset's (None when it is the preset's): its max_step + 1."""
    rows = checked(resolve_run, preset, checked(EXPERIMENTS.__getitem__, name)).train.max_step + 1
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
    return [
        f"{seed_dir(runs_dir(preset), seed)}/{name}/{file}"
        for seed in seeds
        for name in names
        for file in ("metrics.csv", "run.json")
    ]


def planned_run_files(runs):
    """metrics.csv and run.json of each planned run (repro.config.plan.PlannedRun)."""
    return [
        f"results/runs/{run.folder}/{file}" for run in runs for file in ("metrics.csv", "run.json")
    ]


def seed_of(wildcards):
    """The seed a path names: k for a seed<k>/ folder, else 0."""
    return int(wildcards.get("seed", 0))


def notebook_outputs(**parameters):
    """`-p NAME VALUE` for each parameter of a notebook's own (its output paths...), shell-quoted."""
    return " ".join(f"-p {name} {shlex.quote(str(value))}" for name, value in parameters.items())


def prepare_source(wildcards):
    """Where `repro prepare --corpus NAME` takes a corpus from, when the config has a section of
    that name (openwebtext: hub_id or data_files); the library knows each corpus's default."""
    where = config.get(wildcards.corpus) or {}
    if where.get("data_files"):
        return f"--data-files {shlex.quote(where['data_files'])}"
    if where.get("hub_id"):
        return f"--hub-id {shlex.quote(where['hub_id'])}"
    return ""


def indices_input(wildcards):
    """The token files and the preset's YAML: indices are redrawn when a preset is edited."""
    preset = preset_of(wildcards)
    if preset.corpus != wildcards.corpus:
        raise ValueError(
            f"preset {preset.name!r} trains on {preset.corpus!r}, " f"not {wildcards.corpus!r}"
        )
    return {"tokens": token_files(preset.corpus), "preset": preset.source}


def train_input(wildcards):
    preset = preset_of(wildcards)
    rows = experiment_rows(preset, wildcards.experiment)
    return {
        "tokens": token_files(preset.corpus),
        "indices": indices_files(preset.corpus, preset.name, seed_of(wildcards), rows),
    }


def train_gpus(wildcards):
    """The `gpu` resources a training job claims: gpus_per_run for a GPU preset, else none."""
    return config["gpus_per_run"] if wildcards.preset in config["gpu_presets"] else 0


def train_command(wildcards):
    """`repro train`, or torchrun starting gpus_per_run ranks of it (src/repro/runtime/distributed.py)."""
    ranks = config["gpus_per_run"]
    if ranks == 1:
        return "repro train"
    return f"torchrun --standalone --nproc_per_node {ranks} -m repro train"


def device_flag(wildcards):
    return "" if config["device"] == "auto" else f"--device {shlex.quote(config['device'])}"


def seed_run_file(name):
    """A file of seed k's run (wildcards preset, seed, experiment): seed<k>/ below the preset's."""
    return os.path.join(seed_dir("results/runs/{preset}", "{seed}"), "{experiment}", name)


# repro.analysis.notebook_engine: a kernel whose log holds no false warning or error): the preset,
# its runs and the config directory as parameters, plus that notebook's own (params.outputs: its
# output paths, and the number of seeds where it reads them).
PAPERMILL = (
    "papermill --engine repro --no-progress-bar --cwd . {input.notebook:q} {output.notebook:q} "
    "-p preset {params.preset:q} -p runs_dir {params.runs:q} -p config_dir {params.config:q} "
    "{params.outputs} > {log:q} 2>&1"
)


# The tuning comparison's runs (tuning.smk, docs/annex/tuning.md), the query ablation's
# (ablation.smk, docs/annex/ablation.md), decay to zero's (decay_to_zero.smk, docs/annex/decay_to_zero.md) and
# version 3's (v3.smk, docs/annex/v3.md).
TUNING = [e.name for e in checked(EXPERIMENTS.group, "tuning")]
ABLATION = [e.name for e in checked(EXPERIMENTS.group, "query_ablation")]
DECAY_TO_ZERO = [e.name for e in checked(EXPERIMENTS.group, "decay_to_zero")]
V3 = [e.name for e in checked(EXPERIMENTS.group, "v3")]


def trained_tuning_runs(wildcards):
    """The runs of the four groups already there: an input of the joint claims (rule
    claims_joint, annex/claims.smk), which answers "beats the best-tuned baseline", the
    ablation's, decay to zero's and version 3's claims from them, so that it is redone as they
    finish without asking for the others."""
    # Only the runs that `all` does not train: Table 1's are its inputs already, and a sweep run
    # (or an extra experiment) appearing during `all` would change the input set and rerun
    # claims_joint on the next build. `repro claims` reads every run there is when it runs.
    built_by_all = {run.experiment for run in PLANNED_RUNS}
    groups = TUNING + ABLATION + DECAY_TO_ZERO + V3
    extra = [name for name in dict.fromkeys(groups) if name not in built_by_all]
    return [path for path in run_files(extra, seeds=SEEDS) if os.path.exists(path)]


# Downstream tasks (downstream.smk, docs/annex/downstream.md).
DOWNSTREAM_TASKS = config["downstream_tasks"]


def downstream_folders(wildcards=None):
    """The result folder of each Table 1 run of the configured preset at each seed (seed k's in
    seed<k>/, as its run's is: the table pairs it with the baseline's of seed k); no tasks, no
    target."""
    if not DOWNSTREAM_TASKS:
        raise ValueError(
            "results/downstream.csv: no tasks configured; name them, e.g. "
            "--config downstream_tasks='[hellaswag, lambada_openai]'"
        )
    return [
        f"{seed_dir(f'results/downstream/{PRESET.name}', seed)}/{name}"
        for seed in SEEDS
        for name in TABLE1
    ]


def seed_downstream_file(name):
    """A file of seed k's downstream scores (wildcards preset, seed, experiment)."""
    return os.path.join(seed_dir("results/downstream/{preset}", "{seed}"), "{experiment}", name)


def downstream_flags(wildcards):
    """--task for each configured task, and the folder of task YAML files of one's own."""
    flags = [f"--task {shlex.quote(task)}" for task in DOWNSTREAM_TASKS]
    if config["downstream_include_path"]:
        flags.append(f"--include-path {shlex.quote(config['downstream_include_path'])}")
    return " ".join(flags)


# ---- a target no rule makes (targets.smk) ----


def _made_by_rules():
    """One regular expression of every rule's outputs, their wildcards' names dropped."""
    patterns = (f.regex().pattern for r in workflow.rules for f in r.output)
    unnamed = (re.sub(r"\(\?P=\w+\)", ".+", re.sub(r"\(\?P<\w+>", "(?:", p)) for p in patterns)
    return "|".join(p.removesuffix("$") for p in unnamed)


def _targets():
    """The rules' names and the files made by rules without wildcards."""
    names = [r.name for r in workflow.rules if r.name != "unknown_target"]
    files = [str(f) for r in workflow.rules if not r.has_wildcards() for f in r.output]
    return sorted(set(names)), sorted(set(files))


def unknown_target_input(wildcards):
    if wildcards.target not in workflow.dag_settings.targets:
        # Not asked for: no producer, as without this rule (a path no rule makes).
        return f".snakemake/no-rule-makes/{wildcards.target}"
    names, files = _targets()
    closest = difflib.get_close_matches(wildcards.target, names + files, n=1)
    hint = f"did you mean {closest[0]}? " if closest else ""
    tables = [f for f in files if re.fullmatch(r"results/[^/]+\.csv|results/figures/\w+\.png", f)]
    raise WorkflowError(
        f"no rule makes {wildcards.target}; "
        f"{hint}The main targets: main, all, "
        f"{', '.join(tables)}, results/runs/<preset>/<experiment>/metrics.csv (the Snakefile's "
        "header says what each makes)"
    )


# ---- one preset's products kept apart from another's (repro.analysis.kept_apart) ----


def keep_other_presets_apart():
    """Before any job runs: the tables and figures in results/ that another preset's notebooks
    wrote move to results/<that preset>/, so that this preset's never replace them."""
    products = {
        str(r.output.notebook): [str(f) for f in (*r.output, *r.log)]
        for r in workflow.rules
        if "notebook" in r.output.keys() and not r.has_wildcards()
    }
    for line in keep_apart(products, PRESET.name):
        logger.info(line)
