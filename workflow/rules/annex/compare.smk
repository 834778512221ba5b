# When the authors' artefacts are configured (authors.smk), each of our runs is compared with
# theirs of the same configuration: `repro compare` writes the validation-loss difference at each
# common evaluation step and its verdict against the tolerance (our seeds' spread, else 0.01
# nats) to results/authors/compare/<preset>/<experiment>.csv, and its log says on or off course.
# Likewise with the audit's logs said to be our experiments (config audit_runs, audit.smk), to
# results/audit/compare/<preset>/<experiment>.csv.


rule compare_authors:
    input:
        ours="results/runs/{preset}/{experiment}/run.json",
        theirs="results/authors/runs/{preset}/{experiment}/run.json",
    output:
        "results/authors/compare/{preset}/{experiment}.csv",
    log:
        "results/authors/compare/{preset}/{experiment}.log",
    params:
        ours=lambda wildcards, input: os.path.dirname(input.ours),
        theirs=lambda wildcards, input: os.path.dirname(input.theirs),
        config=CONFIG_DIR,
    shell:
        "repro compare {params.ours:q} --reference {params.theirs:q} --config-dir {params.config:q} "
        "--csv {output:q} > {log:q} 2>&1"


use rule compare_authors as compare_audit with:
    input:
        ours="results/runs/{preset}/{experiment}/run.json",
        theirs="results/audit/as/{preset}/{experiment}/run.json",
    output:
        "results/audit/compare/{preset}/{experiment}.csv",
    log:
        "results/audit/compare/{preset}/{experiment}.log",
