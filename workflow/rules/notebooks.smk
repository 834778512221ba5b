# Notebooks -> outputs. papermill executes each notebook (one command, PAPERMILL in common.smk)
# with the configured preset's paths as parameters; the executed copy (with its plots and tables)
# is kept under results/notebooks/. The outputs are those of the configured preset:
# results/table1.csv has a `preset` column and every figure names its preset in the title; the
# runs themselves stay in results/runs/<preset>/. Table 1's claims, Figure 1 and Table 1 over seeds
# read seeds 0..seeds-1 (config `seeds`); Figure 2 and the explorer read seed 0. Every notebook rule
# is rule table1 with its own inputs, outputs, log and `params.outputs` (its output paths).
#
# A run whose folder was deleted is retrained, and these rebuilt, by `snakemake main` or `all`:
# those targets name the runs' files themselves (Snakefile), and a job is rerun when an input is
# remade. (Asked for alone, an up-to-date table does not look at its inputs' producers.)
# (No rule names a conda environment or a container: see the Snakefile.)


rule table1:
    input:
        notebook="notebooks/table1.ipynb",
        runs=run_files(TABLE1_RUNS, seeds=SEEDS),
        authors=lambda wildcards: authors_run_files(TABLE1),
    output:
        table=report("results/table1.csv", caption="../report/table1.rst", category="Table 1"),
        html=report("results/table1.html", caption="../report/table1.rst", category="Table 1"),
        claims=report("results/claims.csv", caption="../report/claims.rst", category="Claims"),
        claims_html=report("results/claims.html", caption="../report/claims.rst", category="Claims"),
        notebook="results/notebooks/table1.ipynb",
    log:
        "results/notebooks/table1.log",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        outputs=lambda wildcards, output: notebook_outputs(
            out_csv=output.table,
            out_html=output.html,
            out_claims=output.claims,
            out_claims_html=output.claims_html,
            seeds=len(SEEDS),
        )
        + authors_param(TABLE1),
    shell:
        PAPERMILL


use rule table1 as figure1 with:
    input:
        notebook="notebooks/figure1.ipynb",
        runs=run_files(TABLE1_RUNS, seeds=SEEDS),  # Table 1's rows: report.equal_rate's too
        authors=lambda wildcards: authors_run_files(TABLE1),
        audit=audit_run_files(TABLE1),
        logs=audit_logs_input,
    output:
        png=report(
            "results/figures/figure1.png", caption="../report/figure1.rst", category="Figure 1"
        ),
        pdf="results/figures/figure1.pdf",
        html=report(
            "results/figures/figure1.html", caption="../report/figure1.rst", category="Figure 1"
        ),
        notebook="results/notebooks/figure1.ipynb",
    log:
        "results/notebooks/figure1.log",
    params:
        outputs=lambda wildcards, output: notebook_outputs(
            out_png=output.png, out_pdf=output.pdf, out_html=output.html, seeds=len(SEEDS)
        )
        + authors_param(TABLE1)
        + audit_param(TABLE1)
        + audit_logs_param(),


use rule table1 as table1_seeds with:
    input:
        notebook="notebooks/table1_seeds.ipynb",
        runs=run_files(TABLE1_RUNS, seeds=SEEDS),
    output:
        table=report(
            "results/table1_seeds.csv",
            caption="../report/table1_seeds.rst",
            category="Table 1 over seeds",
        ),
        html=report(
            "results/table1_seeds.html",
            caption="../report/table1_seeds.rst",
            category="Table 1 over seeds",
        ),
        notebook="results/notebooks/table1_seeds.ipynb",
    log:
        "results/notebooks/table1_seeds.log",
    params:
        outputs=lambda wildcards, output: notebook_outputs(
            out_csv=output.table, out_html=output.html, seeds=len(SEEDS)
        ),


use rule table1 as figure2 with:
    input:
        notebook="notebooks/figure2.ipynb",
        runs=run_files(SWEEP),
        authors=lambda wildcards: authors_run_files(SWEEP),
    output:
        png=report(
            "results/figures/figure2.png", caption="../report/figure2.rst", category="Figure 2"
        ),
        pdf="results/figures/figure2.pdf",
        html=report(
            "results/figures/figure2.html", caption="../report/figure2.rst", category="Figure 2"
        ),
        notebook="results/notebooks/figure2.ipynb",
    log:
        "results/notebooks/figure2.log",
    params:
        outputs=lambda wildcards, output: notebook_outputs(
            out_png=output.png, out_pdf=output.pdf, out_html=output.html
        )
        + authors_param(SWEEP),


use rule table1 as explore with:
    input:
        notebook="notebooks/explore.ipynb",
        runs=run_files(TABLE1),
    output:
        notebook="results/notebooks/explore.ipynb",
    log:
        "results/notebooks/explore.log",
    params:
        outputs="-p runs baseline",
