# Every claim the package checks, together: the text's (Table 1's rows and the divergence, which
# results/claims.csv holds with Holm's correction over those rows alone) and those the groups
# trained beside Table 1 answer (tuning, the query ablation, decay to zero, version 3), with
# Holm's correction over all of them: results/claims_joint.csv (part of `all`). It reads every run
# there is when it runs; its inputs are Table 1's runs and the groups' runs already there, so that
# it is redone as they finish without asking for the others.


rule claims_joint:
    input:
        runs=run_files(TABLE1_RUNS, seeds=SEEDS),
        groups=lambda wildcards: trained_tuning_runs(wildcards),
    output:
        table=report(
            "results/claims_joint.csv", caption="../../report/claims_joint.rst", category="Claims"
        ),
        html=report(
            "results/claims_joint.html", caption="../../report/claims_joint.rst", category="Claims"
        ),
    log:
        "results/claims_joint.log",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        seeds=len(SEEDS),
    shell:
        "repro claims --preset {params.preset:q} --runs {params.runs:q} --seeds {params.seeds} "
        "--config-dir {params.config:q} --out {output.table:q} --html {output.html:q} "
        "> {log:q} 2>&1"
