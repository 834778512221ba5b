# Version 3 (docs/annex/v3.md): group `v3` of config/experiments.yaml (the recipe behind version 3's
# abstract: the nonlinear query at weight decay 0.1, cosine from 3.6e-3 to 2e-5, its neighbours,
# the identity query with and without the larger MLP, the MLP-widened controls, the baseline, and
# the linear query on the same recipe) trained at the configured preset and seeds, then
# notebooks/v3.ipynb writes each setting's loss at its last evaluation with its interval, its
# non-embedding parameters and each model's best (results/v3.csv, and as HTML on the report's
# page), a figure of each setting's loss with its interval (results/figures/v3.png), and version
# 3's claims (results/v3_claims.csv). Not part of `all`: ask for it, e.g.
#   snakemake results/v3.csv --cores 1 --resources gpu=1 --config preset=screen seeds=3


rule v3:
    input:
        notebook="notebooks/v3.ipynb",
        runs=run_files(V3, seeds=SEEDS),
    output:
        table=report(
            "results/v3.csv",
            caption="../../report/v3.rst",
            category="Version 3",
        ),
        html=report(
            "results/v3.html",
            caption="../../report/v3.rst",
            category="Version 3",
        ),
        claims="results/v3_claims.csv",
        figure="results/figures/v3.png",
        figure_pdf="results/figures/v3.pdf",
        figure_html=report(
            "results/figures/v3.html",
            caption="../../report/v3.rst",
            category="Version 3",
        ),
        notebook="results/notebooks/v3.ipynb",
    log:
        "results/notebooks/v3.log",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        outputs=lambda wildcards, output: notebook_outputs(
            out_csv=output.table,
            out_html=output.html,
            out_claims=output.claims,
            out_figure=output.figure,
            out_figure_html=output.figure_html,
            seeds=len(SEEDS),
        ),
    shell:
        PAPERMILL
