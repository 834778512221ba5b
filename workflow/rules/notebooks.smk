# Notebooks -> outputs. papermill executes each notebook (one command, PAPERMILL in common.smk)
# with the configured preset's paths as parameters; the executed copy (with its plots and tables)
# is kept under results/notebooks/. The outputs are those of the configured preset:
# results/table1.csv has a `preset` column and every figure names its preset in the title; the
# runs themselves stay in results/runs/<preset>/. Table 1's claims, Figure 1 and Table 1 over seeds
# read seeds 0..seeds-1 (config `seeds`); Figure 2 and the explorer read seed 0.


rule table1:
    input:
        notebook="notebooks/table1.ipynb",
        runs=run_files(TABLE1, seeds=SEEDS),
        authors=authors_run_files(TABLE1),
    output:
        table="results/table1.csv",
        notebook="results/notebooks/table1.ipynb",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        outputs=lambda wildcards, output: f"-p out_csv {output.table} -p seeds {len(SEEDS)}"
        + authors_param(TABLE1),
    log:
        "results/notebooks/table1.log",
    conda:
        "../../environment.yml"
    shell:
        PAPERMILL


rule figure1:
    input:
        notebook="notebooks/figure1.ipynb",
        runs=run_files(TABLE1, seeds=SEEDS),
        authors=authors_run_files(TABLE1),
    output:
        png="results/figures/figure1.png",
        pdf="results/figures/figure1.pdf",
        notebook="results/notebooks/figure1.ipynb",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        outputs=lambda wildcards, output: (
            f"-p out_png {output.png} -p out_pdf {output.pdf} -p seeds {len(SEEDS)}")
        + authors_param(TABLE1),
    log:
        "results/notebooks/figure1.log",
    conda:
        "../../environment.yml"
    shell:
        PAPERMILL


rule table1_seeds:
    input:
        notebook="notebooks/table1_seeds.ipynb",
        runs=run_files(TABLE1, seeds=SEEDS),
    output:
        table="results/table1_seeds.csv",
        notebook="results/notebooks/table1_seeds.ipynb",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        outputs=lambda wildcards, output: f"-p out_csv {output.table} -p seeds {len(SEEDS)}",
    log:
        "results/notebooks/table1_seeds.log",
    conda:
        "../../environment.yml"
    shell:
        PAPERMILL


rule figure2:
    input:
        notebook="notebooks/figure2.ipynb",
        runs=run_files(SWEEP),
        authors=authors_run_files(SWEEP),
    output:
        png="results/figures/figure2.png",
        pdf="results/figures/figure2.pdf",
        notebook="results/notebooks/figure2.ipynb",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        outputs=lambda wildcards, output: f"-p out_png {output.png} -p out_pdf {output.pdf}"
        + authors_param(SWEEP),
    log:
        "results/notebooks/figure2.log",
    conda:
        "../../environment.yml"
    shell:
        PAPERMILL


rule explore:
    input:
        notebook="notebooks/explore.ipynb",
        runs=run_files(TABLE1),
    output:
        notebook="results/notebooks/explore.ipynb",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        outputs="-p experiment baseline",
    log:
        "results/notebooks/explore.log",
    conda:
        "../../environment.yml"
    shell:
        PAPERMILL
