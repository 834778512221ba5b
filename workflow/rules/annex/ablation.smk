# The query ablation (docs/annex/ablation.md): group `query_ablation` of config/experiments.yaml (ten
# query arms, gated attention's among them, each at the same three learning-rate settings) trained at the configured preset and
# seeds, then notebooks/ablation.ipynb writes each arm's best setting paired with the best linear
# arm (results/ablation.csv, and as HTML on the report's page), every setting
# (results/ablation_settings.csv) and a figure of each setting's loss with its interval
# (results/figures/ablation.png, on the report's page). Not part of `all`: ask for it, e.g. at the screening scale
#   snakemake --cores 1 --resources gpu=1 results/ablation.csv --config preset=screen seeds=3


rule ablation:
    input:
        notebook="notebooks/ablation.ipynb",
        runs=run_files(ABLATION, seeds=SEEDS),
    output:
        table=report(
            "results/ablation.csv", caption="../../report/ablation.rst", category="Ablation"
        ),
        html=report(
            "results/ablation.html", caption="../../report/ablation.rst", category="Ablation"
        ),
        settings="results/ablation_settings.csv",
        figure="results/figures/ablation.png",
        figure_pdf="results/figures/ablation.pdf",
        figure_html=report(
            "results/figures/ablation.html",
            caption="../../report/ablation.rst",
            category="Ablation",
        ),
        notebook="results/notebooks/ablation.ipynb",
    log:
        "results/notebooks/ablation.log",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        outputs=lambda wildcards, output: notebook_outputs(
            out_csv=output.table,
            out_html=output.html,
            out_settings=output.settings,
            out_figure=output.figure,
            out_figure_html=output.figure_html,
            seeds=len(SEEDS),
        ),
    shell:
        PAPERMILL
