"""Figure panels, one module per chapter. Each panel draws on a given Axes from saved results only."""
from .markov import *  # noqa: F401,F403
from .markov import __all__ as _markov_all
from .modular import *  # noqa: F401,F403
from .modular import __all__ as _modular_all

__all__ = [*_markov_all, *_modular_all]
