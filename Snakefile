# Reproduce "Beyond Linearity in Attention Projections: The Case for Nonlinear Queries" (Karbevski 2026).
#
#   corpus -> token files -> fixed indices -> one `repro train` per experiment -> notebooks -> results/
#
# The rules call the `repro` command line and papermill; the logic lives in src/repro.
# Targets: results/table1.csv, results/table1_seeds.csv, results/figures/figure{1,2}.{png,pdf},
# results/tuning.csv (docs/annex/tuning.md), results/ablation.csv (docs/annex/ablation.md),
# results/decay_to_zero.csv (docs/annex/decay_to_zero.md), results/v3.csv (docs/annex/v3.md),
# results/runs/<preset>/<experiment>/metrics.csv, `main` (Table 1 + Figure 1), `all`;
# results/downstream.csv when config downstream_tasks names lm-eval tasks (docs/annex/downstream.md);
# results/audit/ when config audit_logs names the audit's logs (docs/annex/authors.md).

from snakemake.utils import min_version, validate

from repro.config.schema import import_jsonschema

min_version("8.0")


configfile: "config/config.yaml"


# jsonschema imported without its "iri" format's grammar, which validate would otherwise build
# (half of a dry run's CPU: 8.8 s against 4.4 s): the workflow's schema checks no format.
import_jsonschema()
validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


# `snakemake --lint` says "Specify a conda environment or container for each rule" of every rule
# that runs a command: by design, none has one. The workflow runs inside the one environment of
# the README's set-up command (or environment.yml), where `pip install -e .` installs this
# checkout; a per-rule environment would not (Snakemake copies the environment file elsewhere,
# where `-e .` names another folder). tests/workflow/test_workflow_lint.py allows that lint and no other.
include: "workflow/rules/common.smk"
include: "workflow/rules/annex/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/annex/authors.smk"
include: "workflow/rules/annex/audit.smk"
include: "workflow/rules/notebooks.smk"
include: "workflow/rules/annex/tuning.smk"
include: "workflow/rules/annex/ablation.smk"
include: "workflow/rules/annex/decay_to_zero.smk"
include: "workflow/rules/annex/v3.smk"
include: "workflow/rules/annex/claims.smk"
include: "workflow/rules/annex/compare.smk"
include: "workflow/rules/annex/downstream.smk"


# The paper's evidence: Table 1 and Figure 1 (and the explore notebook of the baseline), and
# Table 1 over seeds when the config asks for more than one. The runs' files are named here too:
# a run whose folder was deleted is then retrained, and the tables that read it rebuilt.
rule main:
    input:
        rules.table1.output,
        rules.figure1.output,
        rules.explore.output,
        rules.table1_seeds.output if config["seeds"] > 1 else [],
        run_files(TABLE1_RUNS, seeds=SEEDS),


# Everything: main, the Figure 2 sweep, the extra experiments of config.yaml, the authors'
# artefacts when authors_artefacts is set and the audit's logs when audit_logs is, and the
# evidence table that puts all of them beside the paper's claims. Its runs are the library's
# plan (repro.config.plan.planned_runs), the one `repro status` lists as queued.
rule all:
    default_target: True
    input:
        rules.main.input,
        rules.figure2.output,
        planned_run_files(PLANNED_RUNS),
        authors_targets,
        authors_comparisons,
        audit_targets,
        audit_comparisons,
        rules.claims_joint.output,
        rules.evidence.output,
        rules.downstream.output if DOWNSTREAM_TASKS else [],


# Last: what no rule above makes (workflow/rules/targets.smk).
include: "workflow/rules/targets.smk"
