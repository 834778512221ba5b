# The independent audit's logs (docs/annex/authors.md, "The audit's logs"), when config key audit_logs
# names its neurreps_writeup/logs/ folder: every loss log imported read-only at the preset its
# name says (results/audit/logs/<preset>/<log name>/, a reference for `repro compare`), and each
# log that audit_runs says is an experiment of ours imported as that experiment at the configured
# preset (results/audit/as/<preset>/<experiment>/), which Figure 1 draws beside ours; with what
# audit_configs states of each log's run (Figure 1 also draws each log imported at the configured
# preset whose stated configuration is a Table 1 experiment's, and counts those nobody stated).
# The functions these rules use are in annex/common.smk.


# Rerun when a log is added to or removed from the folder (the folder's mtime changes).
rule import_audit_logs:
    input:
        logs=lambda wildcards: AUDIT_LOGS,
    output:
        directory(AUDIT_IMPORTED),
    log:
        "results/audit/logs.log",
    params:
        config=CONFIG_DIR,
        stated=json.dumps(AUDIT_STATED),
    shell:
        "repro import-audit-logs {input.logs:q} --out {output:q} --config-dir {params.config:q} "
        "--stated {params.stated:q} > {log:q} 2>&1"


rule import_audit_run:
    input:
        log=lambda wildcards: os.path.join(AUDIT_LOGS, AUDIT_RUNS[wildcards.experiment]),
    output:
        metrics="results/audit/as/{preset}/{experiment}/metrics.csv",
        run="results/audit/as/{preset}/{experiment}/run.json",
    log:
        "results/audit/as/{preset}/{experiment}/import.log",
    params:
        preset=lambda wildcards: preset_of(wildcards).source,
        config=CONFIG_DIR,
        out=lambda wildcards, output: os.path.dirname(output.metrics),
        stated=lambda wildcards: json.dumps(AUDIT_STATED.get(AUDIT_RUNS[wildcards.experiment], {})),
    shell:
        "repro import-audit-log {input.log:q} --experiment {wildcards.experiment:q} "
        "--preset {params.preset:q} --out {params.out:q} --config-dir {params.config:q} "
        "--stated {params.stated:q} > {log:q} 2>&1"


# Every log imported, and those of audit_runs (part of `all` when audit_logs is set).
rule audit:
    input:
        audit_targets,


# results/evidence.csv (part of `all`): each of the paper's claims (v1's, version 3's) beside our
# runs of every seed, the authors' imported runs and the audit's logs (those imported as our
# experiments, and those audit_configs states to be one), at the paper's step and at each run's
# end, every number read again from its file; then every claim the package checks with its
# verdict, redone as the groups' runs finish (`repro evidence`, docs/annex/authors.md).
rule evidence:
    input:
        runs=run_files(TABLE1, seeds=SEEDS),
        groups=lambda wildcards: trained_tuning_runs(wildcards),
        authors=lambda wildcards: authors_run_files(TABLE1),
        audit=audit_run_files(TABLE1),
        logs=audit_logs_input,
    output:
        table=report(
            "results/evidence.csv", caption="../../report/evidence.rst", category="Evidence"
        ),
        html=report(
            "results/evidence.html", caption="../../report/evidence.rst", category="Evidence"
        ),
    log:
        "results/evidence.log",
    params:
        preset=PRESET.name,
        runs=lambda wildcards: runs_dir(),
        config=CONFIG_DIR,
        sources=lambda wildcards, input: " ".join(
            f"{option} {shlex.quote(folder)}"
            for option, folder, given in (
                ("--authors-runs", authors_runs_dir(), input.authors),
                ("--audit-runs", audit_runs_dir(), input.audit),
                ("--audit-logs", audit_logs_dir(), input.logs),
            )
            if given
        ),
    shell:
        "repro evidence --preset {params.preset:q} --runs {params.runs:q} --seeds "
        + str(len(SEEDS))
        + " --config-dir {params.config:q} {params.sources} --out {output.table:q} "
        "--html {output.html:q} > {log:q} 2>&1"
