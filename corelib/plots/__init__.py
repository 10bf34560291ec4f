"""Figures, one module per chapter (``<chapter>_figures``; ``modular_runs_figures`` holds what the
two modular-addition chapters and the clock share). ``figure_*`` functions return a whole figure of a chapter;
``panel_*`` functions draw one panel on a given Axes. All draw from saved results only."""

from .ace_method_figures import *  # noqa: F401,F403
from .ace_method_figures import __all__ as _ace_method_all
from .core_inflation_figures import *  # noqa: F401,F403
from .core_inflation_figures import __all__ as _core_inflation_all
from .core_inflation_questions_figures import *  # noqa: F401,F403
from .core_inflation_questions_figures import __all__ as _core_inflation_questions_all
from .grokking_sweeps_figures import *  # noqa: F401,F403
from .grokking_sweeps_figures import __all__ as _grokking_sweeps_all
from .grokking_theory_figures import *  # noqa: F401,F403
from .grokking_theory_figures import __all__ as _grokking_theory_all
from .inflation_clock_figures import *  # noqa: F401,F403
from .inflation_clock_figures import __all__ as _inflation_clock_all
from .markov_chain_figures import *  # noqa: F401,F403
from .markov_chain_figures import __all__ as _markov_chain_all
from .modular_addition_figures import *  # noqa: F401,F403
from .modular_addition_figures import __all__ as _modular_addition_all
from .modular_runs_figures import *  # noqa: F401,F403
from .modular_runs_figures import __all__ as _modular_runs_all
from .own_model_figures import *  # noqa: F401,F403
from .own_model_figures import __all__ as _own_model_all
from .style import figure_message, use_book_style  # noqa: F401
from .subject_verb_agreement_figures import *  # noqa: F401,F403
from .subject_verb_agreement_figures import __all__ as _subject_verb_agreement_all

__all__ = [
    *_ace_method_all,
    *_core_inflation_all,
    *_core_inflation_questions_all,
    *_grokking_sweeps_all,
    *_grokking_theory_all,
    *_inflation_clock_all,
    *_markov_chain_all,
    *_modular_addition_all,
    *_modular_runs_all,
    *_own_model_all,
    *_subject_verb_agreement_all,
    "use_book_style",
    "figure_message",
]
