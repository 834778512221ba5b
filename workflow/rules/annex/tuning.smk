# The tuning comparison (docs/annex/tuning.md): group `tuning` of config/experiments.yaml (the linear
# models at the nonlinear query's settings) trained at the configured preset and seeds, then
# notebooks/tuning.ipynb writes each setting's loss with its interval and each model's best
# (results/tuning.csv, and as HTML on the report's page), and the best nonlinear setting against each linear model's best
# (results/tuning_comparison.csv). Not part of `all`: ask for it, e.g. at the screening scale
#   snakemake --cores 1 --resources gpu=1 results/tuning.csv --config preset=screen seeds=3


rule tuning:
    input:
        notebook="notebooks/tuning.ipynb",
        runs=run_files(TUNING, seeds=SEEDS),
    output:
        table=report("results/tuning.csv", caption="../../report/tuning.rst", category="Tuning"),
        html=report("results/tuning.html", caption="../../report/tuning.rst", category="Tuning"),
        comparison="results/tuning_comparison.csv",
        notebook="results/notebooks/tuning.ipynb",
    log:
        "results/notebooks/tuning.log",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        outputs=lambda wildcards, output: notebook_outputs(
            out_csv=output.table,
            out_html=output.html,
            out_comparison=output.comparison,
            seeds=len(SEEDS),
        ),
    shell:
        PAPERMILL
