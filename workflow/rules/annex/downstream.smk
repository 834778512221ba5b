# Downstream tasks (docs/annex/downstream.md): each Table 1 run's last checkpoint through
# lm-evaluation-harness (`repro downstream`, the `downstream` extra), then the configurations side
# by side with the baseline (`repro downstream-table`): results/downstream.csv. Only when the config
# names tasks (downstream_tasks); their data come from the Hugging Face hub on first use. With
# `seeds: N`, every seed's runs: seed k's scores in results/downstream/<preset>/seed<k>/, which the
# table pairs with the baseline of seed k.


rule downstream_run:
    input:
        run="results/runs/{preset}/{experiment}/run.json",
    output:
        results="results/downstream/{preset}/{experiment}/results.json",
        scores="results/downstream/{preset}/{experiment}/items.json",
    log:
        "results/downstream/{preset}/{experiment}/downstream.log",
    resources:
        gpu=lambda wildcards: 1 if wildcards.preset in config["gpu_presets"] else 0,
    params:
        checkpoint=lambda wildcards, input: os.path.join(
            os.path.dirname(input.run), LIVE, CHECKPOINT
        ),
        out=lambda wildcards, output: os.path.dirname(output.results),
        flags=downstream_flags,
        device=device_flag,
    shell:
        "repro downstream --checkpoint {params.checkpoint:q} {params.flags} --out {params.out:q} "
        "{params.device} > {log:q} 2>&1"


use rule downstream_run as downstream_run_seed with:
    input:
        run=seed_run_file("run.json"),
    output:
        results=seed_downstream_file("results.json"),
        scores=seed_downstream_file("items.json"),
    log:
        seed_downstream_file("downstream.log"),


rule downstream:
    input:
        lambda wildcards: [f"{folder}/results.json" for folder in downstream_folders()],
    output:
        "results/downstream.csv",
    log:
        "results/downstream.log",
    params:
        folders=lambda wildcards: " ".join(shlex.quote(f) for f in downstream_folders()),
        baseline=EXPERIMENTS.baseline,
    shell:
        "repro downstream-table {params.folders} --baseline {params.baseline:q} --out {output:q} "
        "> {log:q} 2>&1"
