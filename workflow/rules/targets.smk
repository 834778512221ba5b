# A target no rule makes (a misspelt file or rule name): one message naming the closest targets
# and listing them, not Snakemake's bare "No rule to produce". The rule below matches only what
# no other rule makes (its pattern excludes theirs), and stops only a target asked for by name:
# an existing file it matches is left as it is, a missing input stays a missing input.
# Included last: the patterns it excludes are those of every rule before it (the functions
# are in common.smk).
rule unknown_target:
    input:
        unknown_target_input,
    output:
        f"{{target,(?!(?:{_made_by_rules()})$)(?:results/.+|[^/]+)}}",
    log:
        ".snakemake/no-rule-makes/{target}.log",
    localrule: True
    run:
        raise WorkflowError(f"no rule makes {output}")
