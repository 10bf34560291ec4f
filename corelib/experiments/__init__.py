"""End-to-end experiments of the book: ``<chapter>`` computes the chapter of that name; computation
chapters share is in a module named for its concept (``modular_runs``, ``paper_scale``)."""
