# Downstream tasks (docs/downstream.md): each Table 1 run's last checkpoint through
# lm-evaluation-harness (`repro downstream`, the `downstream` extra), then the configurations side
# by side with the baseline (`repro downstream-table`): results/downstream.csv. Only when the config
# names tasks (downstream_tasks); their data come from the Hugging Face hub on first use.

DOWNSTREAM_TASKS = config["downstream_tasks"]


def downstream_folders(wildcards=None):
    """The result folder of each Table 1 run of the configured preset; no tasks, no target."""
    if not DOWNSTREAM_TASKS:
        raise ValueError("results/downstream.csv: no tasks configured; name them, e.g. "
                         "--config downstream_tasks='[hellaswag, lambada_openai]'")
    return [f"results/downstream/{PRESET.name}/{name}" for name in TABLE1]


def downstream_flags(wildcards):
    """--task for each configured task, and the folder of task YAML files of one's own."""
    flags = [f"--task {shlex.quote(task)}" for task in DOWNSTREAM_TASKS]
    if config["downstream_include_path"]:
        flags.append(f"--include-path {shlex.quote(config['downstream_include_path'])}")
    return " ".join(flags)


rule downstream_run:
    input:
        run="results/runs/{preset}/{experiment}/run.json",
    output:
        results="results/downstream/{preset}/{experiment}/results.json",
        scores="results/downstream/{preset}/{experiment}/items.json",
    params:
        checkpoint=lambda wildcards, input: os.path.join(os.path.dirname(input.run), "live",
                                                         "ckpt.pt"),
        out=lambda wildcards, output: os.path.dirname(output.results),
        flags=downstream_flags,
        device=device_flag,
    resources:
        gpu=lambda wildcards: 1 if wildcards.preset in config["gpu_presets"] else 0,
    log:
        "results/downstream/{preset}/{experiment}/downstream.log",
    shell:
        "repro downstream --checkpoint {params.checkpoint:q} {params.flags} --out {params.out:q} "
        "{params.device} > {log:q} 2>&1"


rule downstream:
    input:
        lambda wildcards: [f"{folder}/results.json" for folder in downstream_folders()],
    output:
        "results/downstream.csv",
    params:
        folders=lambda wildcards: " ".join(shlex.quote(f) for f in downstream_folders()),
        baseline=EXPERIMENTS.baseline,
    log:
        "results/downstream.log",
    shell:
        "repro downstream-table {params.folders} --baseline {params.baseline:q} --out {output:q} "
        "> {log:q} 2>&1"
