"""Whether a torch dispatch mode is active (a FLOP counter, say), for code that must behave then."""

from __future__ import annotations

import torch


def dispatch_mode_active() -> bool:
    """True inside a ``TorchDispatchMode`` such as ``torch.utils.flop_counter.FlopCounterMode``.

    The engine's one-off work (compiling the masks, checking a product's layout) is skipped
    there: a compiled call made inside one leaves it slower than eager for the rest of the
    process, and a counter would count the check's products as the engine's work.
    """
    try:
        return torch._C._len_torch_dispatch_stack() > 0
    except AttributeError:  # a torch without this query: assume none
        return False
