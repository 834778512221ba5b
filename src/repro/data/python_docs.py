"""Python's own documentation, the smoke corpus: pydoc's topics, then the docstrings and
comments of the standard library's modules, parsed and never imported; no download, and fixed
for a Python version.
"""

from __future__ import annotations

import ast
import io
import os
import sysconfig
import tokenize
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from repro.runtime.signals import exit_with_parent

# The val share: val has more than 50k tokens to draw the smoke preset's 64-token sequences from.
SMOKE_TEST_SIZE = 0.05
# The stdlib directories that are not documentation.
STDLIB_SKIP_DIRS = {"test", "tests", "idlelib", "site-packages"}
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def stdlib_sources() -> list[Path]:
    """The standard library's .py files outside test, idlelib and site-packages, sorted."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = (
        p for p in root.rglob("*.py") if not STDLIB_SKIP_DIRS & set(p.relative_to(root).parts[:-1])
    )
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def module_documents(path: Path) -> list[str]:
    """A module's docstrings, then its comments: without them the corpus is short of 1M tokens."""
    source = path.read_bytes()
    try:
        tree = ast.parse(source)
        comments = [
            t.string.lstrip("#").strip()
            for t in tokenize.tokenize(io.BytesIO(source).readline)
            if t.type == tokenize.COMMENT
        ]
    except (SyntaxError, ValueError, tokenize.TokenError):
        return []  # not Python this interpreter parses (none in CPython 3.11's stdlib)
    docstrings = [
        ast.get_docstring(node) for node in ast.walk(tree) if isinstance(node, _DOCUMENTED)
    ]
    comment_text = "\n".join(c for c in comments if c)
    return [d for d in docstrings if d] + ([comment_text] if comment_text else [])


def python_docs_documents(num_proc: int | None = None) -> list[str]:
    """pydoc's topics (sorted by key), then the stdlib's documents; fixed for a Python version."""
    from pydoc_data.topics import topics

    with ProcessPoolExecutor(
        num_proc or os.cpu_count(), initializer=exit_with_parent, initargs=(os.getpid(),)
    ) as pool:
        per_module = pool.map(module_documents, stdlib_sources(), chunksize=16)
        documents = [d for docs in per_module for d in docs]
        return [text for _, text in sorted(topics.items())] + documents
