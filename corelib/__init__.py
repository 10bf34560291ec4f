"""corelib: Algorithmic Core Extraction (ACE) and the experiments of the executable book."""

__version__ = "0.1.0"
