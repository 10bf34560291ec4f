"""The torch device a run uses: ``ACE_DEVICE`` (``ace-book --device``) when set, else a GPU when present.

torch is imported when a device is asked for, not with this module, so that the command lines
check their flags and refuse bad input in well under a second.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["DEVICE_VARIABLE", "check_device", "default_device"]

DEVICE_VARIABLE = "ACE_DEVICE"  # environment variable naming the device (``ace-book --device``)


def check_device(name: str) -> torch.device:
    """The torch device ``name`` (``cpu``, ``cuda``, ``cuda:1``, ``mps``) if this machine has it; a
    ValueError naming what is available otherwise."""
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        device = None
    available = ["cpu"]
    if torch.cuda.is_available():
        available += ["cuda", *(f"cuda:{i}" for i in range(torch.cuda.device_count()))]
    if torch.backends.mps.is_available():
        available.append("mps")
    has = device is not None and (
        device.type == "cpu"
        or device.type == "cuda"
        and torch.cuda.is_available()
        and (device.index or 0) < torch.cuda.device_count()
        or device.type == "mps"
        and torch.backends.mps.is_available()
        and not device.index
    )
    if not has:
        what = "is not a torch device" if device is None else "is not on this machine"
        raise ValueError(
            f"device {name!r} {what}; this machine has: {', '.join(available)}. Pass one of those "
            f"(--device or {DEVICE_VARIABLE}), or leave it unset to use a GPU when there is one."
        )
    return device


def default_device() -> torch.device:
    """``ACE_DEVICE`` when set (e.g. ``cpu``, ``cuda:1``, ``mps``; checked by :func:`check_device`);
    else a CUDA GPU when present, else Apple's MPS when present, else the CPU."""
    import torch

    name = os.environ.get(DEVICE_VARIABLE)
    if name:
        return check_device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
