"""OpenWebText (or another dataset) from the Hugging Face hub: the given revision, then the Parquet
conversion; the document count decides whether a copy is complete (docs/data.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from repro.data import DataError
from repro.data.corpus import Source, cache_dir, check_disk

OWT_HUB_ID = "Skylion007/openwebtext"
OWT_DOCUMENTS = 8_013_769
PARQUET_REVISION = "refs/convert/parquet"
# Disk estimates (docs/specification.md §5): about 54 GB of datasets cache, and 2 bytes per token
# for about 9.04e9 tokens.
OWT_CACHE_BYTES = 54e9
OWT_TOKEN_BYTES = 2 * 9.04e9


def load_hub(source: Source, out_dir: Path, expected_docs: int | None, num_proc: int):
    """The first complete copy of the hub dataset, and the revision it came from."""
    import datasets

    scale = (expected_docs or OWT_DOCUMENTS) / OWT_DOCUMENTS
    check_disk({cache_dir(source): OWT_CACHE_BYTES * scale, out_dir: OWT_TOKEN_BYTES * scale})
    tried = []
    for revision in dict.fromkeys([source.revision, PARQUET_REVISION]):
        try:
            dataset = datasets.load_dataset(
                source.hub_id,
                revision=revision,
                split="train",
                cache_dir=source.cache_dir,
                num_proc=num_proc,
            )
        except Exception as e:  # offline, no such revision, a refused loading script: try the next
            reason = (str(e) or type(e).__name__).splitlines()[0]
            tried.append(f"revision {revision or 'default'}: {reason}")
            continue
        if expected_docs is None or len(dataset) == expected_docs:
            return dataset, revision
        tried.append(
            f"revision {revision or 'default'}: {len(dataset):,} documents, "
            f"expected {expected_docs:,}"
        )
    raise DataError(
        f"{source.hub_id}: no complete copy ({'; '.join(tried)}); download the full "
        f"corpus as parquet/jsonl/txt files and pass them with --data-files GLOB"
    )


def hub_files(source: Source, revision: str | None) -> dict:
    """The commit and the train data files, in order, that datasets resolves for a hub revision
    (paths hf://datasets/ID@COMMIT/...); empty where datasets cannot say (a loading script)."""
    import datasets

    try:
        builder = datasets.load_dataset_builder(
            source.hub_id, revision=revision, cache_dir=source.cache_dir
        )
        files = [str(f) for f in builder.config.data_files["train"]]
    except Exception:  # offline, a script dataset (no data_files): the manifest says less
        return {}
    commits = {m.group(1) for f in files if (m := re.search(r"@([0-9a-f]{40})/", f))}
    return {"commit": commits.pop() if len(commits) == 1 else None, "data_files": files}
