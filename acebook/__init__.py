"""acebook: the machinery that builds the executable book around ``corelib``.

- :mod:`acebook.project`: the book's files (``_toc.yml``, ``profiles.yml``, chapter sources).
- :mod:`acebook.runner`: executes the chapters with papermill and renders the site
  (``python -m acebook.runner``).
- :mod:`acebook.run_times`: each chapter's recorded wall time and the code version that ran.
- :mod:`acebook.claims_page`: the claims tables shown on the claims page and on each chapter.

Dependencies point one way: ``acebook`` imports ``corelib``, never the reverse.
"""
