"""The precisions the engine trains in: fp32, or bf16 for the training passes' matmuls where the
hardware computes bf16 natively (:func:`bf16_native`); ``"auto"`` picks bf16 only there
(:func:`resolve_precision`). :class:`corelib.stack_optimizer.StackOptimizer` applies it.
"""

from __future__ import annotations

import torch

__all__ = ["PRECISIONS", "check_precision", "bf16_native", "resolve_precision"]

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}


def check_precision(precision: str) -> torch.dtype:
    """The compute dtype of a training precision, or an error naming the choices."""
    if precision not in PRECISIONS:
        fix = " (resolve 'auto' for a device with resolve_precision first)" if precision == "auto" else ""
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}{fix}.")
    return PRECISIONS[precision]


def bf16_native(device: torch.device | str) -> bool:
    """Whether ``device`` computes bf16 matmuls in hardware.

    A CPU with AVX512-BF16 or AMX tiles, or an NVIDIA GPU of compute capability 8.0 or later
    (Ampere on). Elsewhere (an older CPU or GPU, a ROCm GPU, whose bf16 units this check cannot
    tell, Apple's MPS) bf16 is emulated or was never validated, and the book does not train in it.
    """
    device = torch.device(device)
    if device.type == "cpu":
        return _cpu_has_bf16()
    if device.type == "cuda" and torch.cuda.is_available() and not torch.version.hip:
        index = torch.cuda.current_device() if device.index is None else device.index
        return torch.cuda.get_device_capability(index)[0] >= 8
    return False


def resolve_precision(precision: str, device: torch.device | str) -> str:
    """The training precision to use on ``device``: ``"fp32"`` or ``"bf16"``.

    ``"auto"`` is bf16 where the hardware computes it natively (:func:`bf16_native`), else fp32.
    ``"bf16"`` where it would be emulated is refused: it trains slower than fp32 there, and its
    rounding is not the one ``recorded/bf16_fidelity_*.json`` validated.
    """
    if precision == "auto":
        return "bf16" if bf16_native(device) else "fp32"
    check_precision(precision)
    if precision == "bf16" and not bf16_native(device):
        raise ValueError(
            f"precision 'bf16' would be emulated on {torch.device(device)} (bf16 matmuls need a CPU with "
            "AVX512-BF16 or AMX, or an NVIDIA GPU of compute capability 8.0 or later): it would train slower "
            "than fp32. Use precision='fp32', or 'auto', which picks bf16 only where the hardware has it."
        )
    return precision


def _cpu_has_bf16() -> bool:
    """Whether this CPU has bf16 matrix instructions (AVX512-BF16 or AMX tiles).

    Not oneDNN's own bf16 check, which holds on any AVX-512 CPU (Skylake on), where it emulates bf16
    and runs a matmul slower than in fp32."""
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):
        return False
