"""The data side: corpus, preparation, tokenizer, token files, fixed batch indices, batches."""

from repro.errors import ReproError


class DataError(ReproError):
    """A corpus, token file or manifest that cannot be used; the message names the file or field.

    Here, not in repro.data.tokens: the corpus checks raise it without importing numpy, which the
    command line's start (`repro --help`, `repro status`) need not pay for."""
