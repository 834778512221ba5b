"""The annex: what leans on the core but is not on the paper's path; the core never imports it."""
