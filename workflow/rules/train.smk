# One `repro train` per (preset, experiment, seed): seed 0 in results/runs/<preset>/<experiment>/,
# seed k in results/runs/<preset>/seed<k>/<experiment>/ (its own indices, repro.config.Preset.with_seed).
#
# Runs are precious. `repro train` works in results/runs/<preset>/<experiment>/live/ (ckpt.pt,
# metrics.csv and run.json as they grow), which is never a declared output, so Snakemake never
# deletes it: an interrupted run resumes from its checkpoint when the target is asked for again,
# and a finished one is not retrained (`repro train` on a completed run does nothing). The
# declared outputs, metrics.csv and run.json one level up, are copied from live/ by `repro train
# --publish` only when the run has ended (completed or diverged). The shell execs `repro train`,
# so that the trainer is Snakemake's own child: with --exit-with-parent it checkpoints and stops
# when Snakemake dies, and never publishes outputs a dead workflow no longer owns. live/.lock
# keeps a second trainer out of a run while one is writing it.
# (No rule names a conda environment or a container: see the Snakefile.)


# Snakemake says nothing of a job between its start and its end: where training's progress is,
# said once as the workflow starts. (A rule's message would replace its resources in the console.)
# Also, before any job: another preset's tables and figures move out of the way (common.smk).
onstart:
    keep_other_presets_apart()
    logger.info(
        f"training progress: `repro status --preset {PRESET.name}` shows the step, loss and "
        "ETA of every run; a run's own log is "
        "results/runs/<preset>/<experiment>/live/train.log"
    )


rule train:
    input:
        unpack(train_input),
    output:
        metrics="results/runs/{preset}/{experiment}/metrics.csv",
        run="results/runs/{preset}/{experiment}/run.json",
    log:
        "results/runs/{preset}/{experiment}/train.log",
    threads: config["train_threads"]
    resources:
        gpu=train_gpus,
        mem_mb=lambda wildcards: preset_of(wildcards).resources.mem_mb,  # for profiles/slurm/
        runtime=lambda wildcards: preset_of(wildcards).resources.runtime,
    params:
        preset=lambda wildcards: preset_of(wildcards).source,
        config=CONFIG_DIR,
        data=lambda wildcards, input: os.path.dirname(input.tokens[0]),
        indices=lambda wildcards, input: os.path.dirname(input.indices[0]),
        run=lambda wildcards, output: os.path.dirname(output.metrics),
        live=lambda wildcards, output: os.path.join(os.path.dirname(output.metrics), LIVE),
        device=device_flag,
        seed=seed_of,
        command=train_command,
    shell:
        "exec {params.command} --preset {params.preset:q} --experiment {wildcards.experiment:q} "
        "--seed {params.seed} "
        "--config-dir {params.config:q} --data {params.data:q} --indices {params.indices:q} "
        "--out {params.live:q} --publish {params.run:q} --exit-with-parent {params.device} "
        "> {log:q} 2>&1"


use rule train as train_seed with:
    output:
        metrics=seed_run_file("metrics.csv"),
        run=seed_run_file("run.json"),
    log:
        seed_run_file("train.log"),
