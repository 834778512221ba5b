# Reproduce "Beyond Linearity in Attention Projections: The Case for Nonlinear Queries" (Karbevski 2026).
#
#   corpus -> token files -> fixed indices -> one `repro train` per experiment -> notebooks -> results/
#
# The rules call the `repro` command line and papermill; the logic lives in src/repro.
# Targets: results/table1.csv, results/table1_seeds.csv, results/figures/figure{1,2}.{png,pdf},
# results/tuning.csv (docs/tuning.md),
# results/runs/<preset>/<experiment>/metrics.csv, `main` (Table 1 + Figure 1), `all`;
# results/downstream.csv when config downstream_tasks names lm-eval tasks (docs/downstream.md).

from snakemake.utils import min_version, validate

min_version("8.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/authors.smk"
include: "workflow/rules/notebooks.smk"
include: "workflow/rules/tuning.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/downstream.smk"


# The paper's evidence: Table 1 and Figure 1 (and the explore notebook of the baseline), and
# Table 1 over seeds when the config asks for more than one.
rule main:
    input:
        rules.table1.output,
        rules.figure1.output,
        rules.explore.output,
        rules.table1_seeds.output if config["seeds"] > 1 else [],


# Everything: main, the Figure 2 sweep, and the extra experiments of config.yaml.
rule all:
    default_target: True
    input:
        rules.main.input,
        rules.figure2.output,
        run_files(config["extra_experiments"]),
        rules.authors.input if AUTHORS_ARTEFACTS else [],
        authors_comparisons(TABLE1 + SWEEP + config["extra_experiments"]),
        rules.downstream.output if DOWNSTREAM_TASKS else [],
