# Corpus -> token files (train.bin, val.bin, manifest.json), then the fixed batch indices (docs/specification.md §6),
# one set per seed: seed 0's in indices/<preset>/, seed k's in indices/<preset>/seed<k>/; an
# experiment with its own schedule length (the untied runs) reads rows<R>/ below those.
# (No rule names a conda environment or a container: see the Snakefile.)


rule prepare:
    output:
        token_files("{corpus}"),
    log:
        f"{DATA}/{{corpus}}/prepare.log",
    threads: 4
    params:
        source=prepare_source,
        out=lambda wildcards, output: os.path.dirname(output[0]),
    shell:
        "repro prepare --corpus {wildcards.corpus:q} {params.source} --num-proc {threads} "
        "--out {params.out:q} > {log:q} 2>&1"


rule indices:
    input:
        unpack(indices_input),
    output:
        indices_files("{corpus}", "{preset}"),
    log:
        f"{DATA}/{{corpus}}/indices/{{preset}}.log",
    params:
        data=lambda wildcards, input: os.path.dirname(input.tokens[0]),
        out=lambda wildcards, output: os.path.dirname(output[0]),
        seed=seed_of,
        rows=rows_flag,
    shell:
        "repro indices --preset {input.preset:q} --seed {params.seed} --data {params.data:q} "
        "--out {params.out:q} {params.rows} > {log:q} 2>&1"


use rule indices as indices_seed with:
    output:
        indices_files("{corpus}", "{preset}", "{seed}"),
    log:
        f"{DATA}/{{corpus}}/indices/{{preset}}/seed{{seed}}.log",


use rule indices as indices_rows with:
    output:
        indices_files("{corpus}", "{preset}", rows="{rows}"),
    log:
        f"{DATA}/{{corpus}}/indices/{{preset}}/rows{{rows}}.log",


use rule indices as indices_seed_rows with:
    output:
        indices_files("{corpus}", "{preset}", "{seed}", "{rows}"),
    log:
        f"{DATA}/{{corpus}}/indices/{{preset}}/seed{{seed}}/rows{{rows}}.log",
