"""The data side: corpus, preparation, tokenizer, token files, fixed batch indices, batches."""

from repro.errors import ReproError


class DataError(ReproError):
    """An unusable corpus, token file or manifest; here, so that raising it imports no numpy."""
