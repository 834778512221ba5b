"""The data side: corpus, preparation, tokenizer, token files, fixed batch indices, batches."""
