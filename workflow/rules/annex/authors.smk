# The authors' artefacts (docs/specification.md §8), when config key `authors_artefacts` names the
# downloaded folder of their out_config_* folders: checkpoint authors_runs finds which experiments
# they are (`source:` in config/experiments.yaml); each is imported as a run
# (results/authors/runs/<preset>/), each checkpoint of Table 1's is evaluated on our token files
# and fixed indices, and results/authors/table1.csv sets those losses beside their logged ones
# and the paper's. The notebooks then draw the imported runs beside ours (authors_param). The
# functions these rules use are in annex/common.smk.
# (No rule names a conda environment or a container: see the Snakefile.)


# Rerun when a folder is added to or removed from the artefacts (the folder's mtime changes).
checkpoint authors_runs:
    input:
        artefacts=lambda wildcards: AUTHORS_ARTEFACTS,
    output:
        AUTHORS_FOUND,
    log:
        "results/authors/found/runs.log",
    params:
        config=CONFIG_DIR,
    shell:
        "repro authors-runs {input.artefacts:q} --config-dir {params.config:q} --out {output:q} "
        "> {log:q} 2>&1"


rule import_authors_run:
    input:
        found=AUTHORS_FOUND,
        tensors=lambda wildcards: [
            os.path.join(authors_folder(wildcards), name) for name in AUTHORS_TENSORS
        ],
    output:
        metrics="results/authors/runs/{preset}/{experiment}/metrics.csv",
        run="results/authors/runs/{preset}/{experiment}/run.json",
    log:
        "results/authors/runs/{preset}/{experiment}/import.log",
    params:
        folder=authors_folder,
        preset=lambda wildcards: preset_of(wildcards).source,
        config=CONFIG_DIR,
        out=lambda wildcards, output: os.path.dirname(output.metrics),
    shell:
        "repro import-authors-run {params.folder:q} --out {params.out:q} "
        "--preset {params.preset:q} --experiment {wildcards.experiment:q} "
        "--config-dir {params.config:q} > {log:q} 2>&1"


# One evaluation of a checkpoint: on the sequences of its own step (`at` checkpoint) or of the
# table step (`at` table).
rule evaluate_authors_checkpoint:
    input:
        unpack(train_input),
        found=AUTHORS_FOUND,
        checkpoint=lambda wildcards: os.path.join(authors_folder(wildcards), "ckpt.pt"),
    output:
        "results/authors/evaluations/{preset}/{experiment}.{at}-step.json",
    log:
        "results/authors/evaluations/{preset}/{experiment}.{at}-step.log",
    wildcard_constraints:
        at="checkpoint|table",
    resources:
        gpu=lambda wildcards: int(wildcards.preset in config["gpu_presets"]),
    params:
        preset=lambda wildcards: preset_of(wildcards).source,
        step=lambda wildcards: (
            f"--step {preset_of(wildcards).report.table_step}" if wildcards.at == "table" else ""
        ),
        data=lambda wildcards, input: os.path.dirname(input.tokens[0]),
        indices=lambda wildcards, input: os.path.dirname(input.indices[0]),
        device=device_flag,
    shell:
        "repro evaluate --checkpoint {input.checkpoint:q} --preset {params.preset:q} "
        "--data {params.data:q} --indices {params.indices:q} {params.step} {params.device} "
        "--json > {output:q} 2> {log:q}"


rule authors_table1:
    input:
        found=AUTHORS_FOUND,
        evaluations=lambda wildcards: authors_evaluations(TABLE1),
        runs=lambda wildcards: authors_run_files(TABLE1),
    output:
        "results/authors/table1.csv",
    log:
        "results/authors/table1.log",
    params:
        evaluations=lambda wildcards: f"results/authors/evaluations/{PRESET.name}",
        runs=lambda wildcards: authors_runs_dir(),
        preset=PRESET.source,
        config=CONFIG_DIR,
    shell:
        "repro authors-table --evaluations {params.evaluations:q} --runs {params.runs:q} "
        "--preset {params.preset:q} --config-dir {params.config:q} --out {output:q} > {log:q} 2>&1"


# Every imported run and the recomputed Table 1 (part of `all` when authors_artefacts is set).
rule authors:
    input:
        authors_targets,
