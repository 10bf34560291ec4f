"""Figures, one module per chapter. ``figure_*`` functions return a whole figure of a chapter;
``panel_*`` functions draw one panel on a given Axes. All draw from saved results only."""

from .ace_method import *  # noqa: F401,F403
from .ace_method import __all__ as _ace_method_all
from .clock import *  # noqa: F401,F403
from .clock import __all__ as _clock_all
from .markov import *  # noqa: F401,F403
from .markov import __all__ as _markov_all
from .modular import *  # noqa: F401,F403
from .modular import __all__ as _modular_all
from .own_model import *  # noqa: F401,F403
from .own_model import __all__ as _own_model_all
from .style import figure_message, use_book_style  # noqa: F401
from .sva import *  # noqa: F401,F403
from .sva import __all__ as _sva_all
from .sweeps import *  # noqa: F401,F403
from .sweeps import __all__ as _sweeps_all
from .theory import *  # noqa: F401,F403
from .theory import __all__ as _theory_all

__all__ = [
    *_ace_method_all,
    *_clock_all,
    *_markov_all,
    *_modular_all,
    *_own_model_all,
    *_sva_all,
    *_sweeps_all,
    *_theory_all,
    "use_book_style",
    "figure_message",
]
