"""End-to-end experiments of the book: one module per chapter's computation."""
