# Decay to zero (docs/annex/decay_to_zero.md): group `decay_to_zero` of config/experiments.yaml (the
# linear baseline and the nonlinear query, each at two peak rates, the learning rate decaying to
# zero linearly and by cosine) trained at the configured preset and seeds, then
# notebooks/decay_to_zero.ipynb writes each setting's loss at its last evaluation with its interval
# and each model's best (results/decay_to_zero.csv, and as HTML on the report's page, with the
# figure results/figures/decay_to_zero.png), and the best nonlinear setting against the best linear
# one (results/decay_to_zero_comparison.csv). Not part of `all`: ask for it, e.g. at the screening scale
#   snakemake results/decay_to_zero.csv --cores 1 --resources gpu=1 --config preset=screen seeds=3


rule decay_to_zero:
    input:
        notebook="notebooks/decay_to_zero.ipynb",
        runs=run_files(DECAY_TO_ZERO, seeds=SEEDS),
    output:
        table=report(
            "results/decay_to_zero.csv",
            caption="../../report/decay_to_zero.rst",
            category="Decay to zero",
        ),
        html=report(
            "results/decay_to_zero.html",
            caption="../../report/decay_to_zero.rst",
            category="Decay to zero",
        ),
        comparison="results/decay_to_zero_comparison.csv",
        figure="results/figures/decay_to_zero.png",
        figure_pdf="results/figures/decay_to_zero.pdf",
        figure_html=report(
            "results/figures/decay_to_zero.html",
            caption="../../report/decay_to_zero.rst",
            category="Decay to zero",
        ),
        notebook="results/notebooks/decay_to_zero.ipynb",
    log:
        "results/notebooks/decay_to_zero.log",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        outputs=lambda wildcards, output: notebook_outputs(
            out_csv=output.table,
            out_html=output.html,
            out_comparison=output.comparison,
            out_figure=output.figure,
            out_figure_html=output.figure_html,
            seeds=len(SEEDS),
        ),
    shell:
        PAPERMILL
