"""The data side: corpus, preparation, tokenizer, token files, fixed batch indices, batches."""

from repro.errors import ReproError


class DataError(ReproError):
    """A corpus, token file or manifest that cannot be used. Here, not in repro.data.tokens, so
    that raising it imports no numpy (`repro --help` need not pay for it)."""
