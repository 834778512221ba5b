# Reproduce "Beyond Linearity in Attention Projections: The Case for Nonlinear Queries" (Karbevski 2026).
#
#   corpus -> token files -> fixed indices -> one `repro train` per experiment -> notebooks -> results/
#
# The rules call the `repro` command line and papermill; the logic lives in src/repro.
# Targets: results/table1.csv, results/figures/figure{1,2}.{png,pdf},
# results/runs/<preset>/<experiment>/metrics.csv, `main` (Table 1 + Figure 1), `all`.

from snakemake.utils import min_version, validate

min_version("8.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/notebooks.smk"


rule all:
    input:
        rules.main.input,
        rules.figure2.output,
        run_files(config["extra_experiments"]),
