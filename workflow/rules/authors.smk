# The authors' artefacts (docs/specification.md §8), when config key `authors_artefacts` names the
# downloaded folder of their out_config_* folders: each run of theirs that an experiment names
# (`source:` in config/experiments.yaml) is imported as a run (results/authors/runs/<preset>/),
# each checkpoint of Table 1's is evaluated on our token files and fixed indices, and
# results/authors/table1.csv sets those losses beside their logged ones and the paper's. The
# notebooks then draw the imported runs beside ours (authors_param).

from repro.config.experiments import authors_folders, source_of

AUTHORS_ARTEFACTS = config["authors_artefacts"]
AUTHORS_FOLDERS = {}  # experiment -> its folder in the artefacts
if AUTHORS_ARTEFACTS:
    if not os.path.isdir(AUTHORS_ARTEFACTS):
        raise ValueError(f"Invalid configuration: authors_artefacts: no folder {AUTHORS_ARTEFACTS!r}")
    for _folder in authors_folders(AUTHORS_ARTEFACTS):
        _experiment = EXPERIMENTS.by_source(source_of(_folder))
        if _experiment is not None:
            AUTHORS_FOLDERS[_experiment.name] = str(_folder)
AUTHORS_TENSORS = ("tensor.pt", "eval_train_tensor.pt", "eval_val_tensor.pt")


def authors_runs_dir(preset=None):
    return f"results/authors/runs/{(preset or PRESET).name}"


def authors_run_files(names):
    """metrics.csv and run.json of the imported authors' runs among `names` (none if unset)."""
    return [f"{authors_runs_dir()}/{name}/{file}" for name in names if name in AUTHORS_FOLDERS
            for file in ("metrics.csv", "run.json")]


def authors_param(names):
    """The notebooks' `-p authors_runs_dir` when any of `names` was imported."""
    return f" -p authors_runs_dir {authors_runs_dir()}" if authors_run_files(names) else ""


def authors_folder(wildcards):
    if wildcards.experiment not in AUTHORS_FOLDERS:
        raise ValueError(f"no folder of the authors' artefacts ({AUTHORS_ARTEFACTS}) is "
                         f"experiment {wildcards.experiment!r}")
    return AUTHORS_FOLDERS[wildcards.experiment]


def authors_evaluations(names):
    """The evaluations of the authors' checkpoints (ckpt.pt) among `names`."""
    return [f"results/authors/evaluations/{PRESET.name}/{name}.{step}-step.json"
            for name in names if os.path.exists(f"{AUTHORS_FOLDERS.get(name)}/ckpt.pt")
            for step in ("checkpoint", "table")]


rule import_authors_run:
    input:
        lambda wildcards: [f"{authors_folder(wildcards)}/{name}" for name in AUTHORS_TENSORS],
    output:
        metrics="results/authors/runs/{preset}/{experiment}/metrics.csv",
        run="results/authors/runs/{preset}/{experiment}/run.json",
    params:
        folder=authors_folder,
        preset=lambda wildcards: preset_of(wildcards).source,
        config=CONFIG_DIR,
        out=lambda wildcards, output: os.path.dirname(output.metrics),
    log:
        "results/authors/runs/{preset}/{experiment}/import.log",
    shell:
        "repro import-authors-run {params.folder} --out {params.out} --preset {params.preset} "
        "--experiment {wildcards.experiment} --config-dir {params.config} > {log} 2>&1"


rule evaluate_authors_checkpoint:
    input:
        unpack(train_input),
        checkpoint=lambda wildcards: f"{authors_folder(wildcards)}/ckpt.pt",
    output:
        own="results/authors/evaluations/{preset}/{experiment}.checkpoint-step.json",
        table="results/authors/evaluations/{preset}/{experiment}.table-step.json",
    params:
        preset=lambda wildcards: preset_of(wildcards).source,
        table_step=lambda wildcards: preset_of(wildcards).report.table_step,
        data=lambda wildcards, input: os.path.dirname(input.tokens[0]),
        indices=lambda wildcards, input: os.path.dirname(input.indices[0]),
        device=device_flag,
    resources:
        gpu=lambda wildcards: int(wildcards.preset in config["gpu_presets"]),
    log:
        "results/authors/evaluations/{preset}/{experiment}.log",
    shell:
        "repro evaluate --checkpoint {input.checkpoint} --preset {params.preset} "
        "--data {params.data} --indices {params.indices} {params.device} --json "
        "> {output.own} 2> {log} && "
        "repro evaluate --checkpoint {input.checkpoint} --preset {params.preset} "
        "--data {params.data} --indices {params.indices} {params.device} --json "
        "--step {params.table_step} > {output.table} 2>> {log}"


rule authors_table1:
    input:
        evaluations=authors_evaluations(TABLE1),
        runs=authors_run_files(TABLE1),
    output:
        "results/authors/table1.csv",
    run:
        from repro.authors.runs import checkpoint_table

        checkpoint_table(f"results/authors/evaluations/{PRESET.name}", authors_runs_dir(),
                         PRESET, EXPERIMENTS).to_csv(output[0], index=False)


# Every imported run and the recomputed Table 1 (part of `all` when authors_artefacts is set).
rule authors:
    input:
        rules.authors_table1.output,
        authors_run_files(list(AUTHORS_FOLDERS)),
