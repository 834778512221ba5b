# The functions the annex's rules share (authors.smk: the authors' artefacts; audit.smk: the
# audit's logs), and the checks of their config keys, run when the workflow is parsed. Like
# common.smk, none of it writes a file or reads the authors' artefacts or the audit's logs: jobs do.

import hashlib
import json

# The authors' artefacts (config key authors_artefacts, authors.smk): the job of checkpoint
# authors_runs finds which experiments their downloaded folders are; the functions below read what
# it found, so nothing is read from the artefacts while the workflow is parsed.
AUTHORS_ARTEFACTS = config["authors_artefacts"]
AUTHORS_TENSORS = ("tensor.pt", "eval_train_tensor.pt", "eval_val_tensor.pt")
# What the job found, in a file named after the folder: another authors_artefacts is another
# search (and one that names no folder stops the DAG, naming it). The rules that read the file
# name it as an input too, so that the job is in the DAG.
AUTHORS_FOUND = (
    f"results/authors/found/{hashlib.sha256(str(AUTHORS_ARTEFACTS).encode()).hexdigest()[:16]}.json"
)


def authors_found():
    """Experiment -> {"folder", "checkpoint"}: the authors' runs in the artefacts (none if unset)."""
    if not AUTHORS_ARTEFACTS:
        return {}
    with open(checkpoints.authors_runs.get().output[0]) as f:  # AUTHORS_FOUND
        return json.load(f)


def authors_runs_dir(preset=None):
    return f"results/authors/runs/{(preset or PRESET).name}"


def authors_run_files(names):
    """metrics.csv and run.json of the imported authors' runs among `names` (none if unset)."""
    found = authors_found()
    return [
        f"{authors_runs_dir()}/{name}/{file}"
        for name in names
        if name in found
        for file in ("metrics.csv", "run.json")
    ]


def authors_param(names):
    """The notebooks' `-p authors_runs_dir` when any of `names` was imported."""
    return (
        f" -p authors_runs_dir {shlex.quote(authors_runs_dir())}"
        if authors_run_files(names)
        else ""
    )


def authors_folder(wildcards):
    found = authors_found()
    if wildcards.experiment not in found:
        raise ValueError(
            f"no folder of the authors' artefacts ({AUTHORS_ARTEFACTS}) is "
            f"experiment {wildcards.experiment!r}"
        )
    return found[wildcards.experiment]["folder"]


def authors_evaluations(names):
    """The evaluations of the authors' checkpoints (ckpt.pt) among `names`."""
    found = authors_found()
    return [
        f"results/authors/evaluations/{PRESET.name}/{name}.{at}-step.json"
        for name in names
        if found.get(name, {}).get("checkpoint")
        for at in ("checkpoint", "table")
    ]


def authors_comparisons(wildcards):
    """Our runs (Table 1, the sweep, the extra experiments) compared with the authors' runs of the
    same configuration, where they were imported (compare.smk)."""
    found = authors_found()
    names = TABLE1 + SWEEP + config["extra_experiments"]
    return [f"results/authors/compare/{PRESET.name}/{name}.csv" for name in names if name in found]


def authors_targets(wildcards):
    """Every imported run and the recomputed Table 1 (part of `all` when authors_artefacts is set)."""
    if not AUTHORS_ARTEFACTS:
        return []
    return [AUTHORS_FOUND, "results/authors/table1.csv", *authors_run_files(list(authors_found()))]


# The audit's logs (config keys audit_logs, audit_runs and audit_configs, audit.smk): the keys are
# checked here, while the workflow is parsed; the logs are read by jobs.
AUDIT_LOGS = config["audit_logs"]
AUDIT_RUNS = config["audit_runs"]
AUDIT_IMPORTED = "results/audit/logs"  # every log, at <preset>/<log name>/
AUDIT_STATED = config["audit_configs"]  # log file name -> what the user states of its run
if AUDIT_LOGS or AUDIT_RUNS or AUDIT_STATED:  # the annex's modules only where its keys are set
    from repro.annex.authors.audit_log import AuditError, check_workflow_keys

    try:
        check_workflow_keys(AUDIT_LOGS, AUDIT_RUNS, AUDIT_STATED, EXPERIMENTS, "results")
    except AuditError as e:
        raise ValueError(f"Invalid configuration: {e}") from None


def audit_runs_dir():
    return f"results/audit/as/{PRESET.name}"


def audit_run_files(names):
    """metrics.csv and run.json of the audit's logs imported as experiments among `names`."""
    return [
        f"{audit_runs_dir()}/{name}/{file}"
        for name in names
        if name in AUDIT_RUNS
        for file in ("metrics.csv", "run.json")
    ]


def audit_param(names):
    """The notebooks' `-p audit_runs_dir` when any of `names` is an audit's log."""
    return f" -p audit_runs_dir {shlex.quote(audit_runs_dir())}" if audit_run_files(names) else ""


def audit_logs_dir():
    """The logs imported at the configured preset (with what audit_configs states of each)."""
    return f"{AUDIT_IMPORTED}/{PRESET.name}"


def audit_logs_input(wildcards):
    """The import of every log, when audit_logs is set: Figure 1 and the evidence read it."""
    return [AUDIT_IMPORTED] if AUDIT_LOGS else []


def audit_logs_param():
    """The figure 1 notebook's `-p audit_logs_dir` when audit_logs is set: the logs whose stated
    configuration is an experiment's are drawn, the others counted."""
    return f" -p audit_logs_dir {shlex.quote(audit_logs_dir())}" if AUDIT_LOGS else ""


def audit_comparisons(wildcards):
    """Our runs compared with the audit's logs said to be the same experiments (compare.smk)."""
    return [f"results/audit/compare/{PRESET.name}/{name}.csv" for name in AUDIT_RUNS]


def audit_targets(wildcards):
    """Every log imported, and those of audit_runs as our experiments (in `all` with audit_logs)."""
    if not AUDIT_LOGS:
        return []
    return [AUDIT_IMPORTED, *audit_run_files(list(AUDIT_RUNS))]
