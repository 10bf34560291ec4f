"""The training engine's dropout masks: a counter-based generator, vectorised, on any device.

A mask element is a pure function of four integers: its seed's stream key, the number of the
training step (the stream's draw), the dropout site, and the element's position in the mask a
full forward pass would use. Nothing else is carried from step to step, so

- all seeds' masks of a step come from a few integer operations on whole tensors, on the
  training device, with no per-element loop and no host synchronisation;
- a pass that computes only part of an activation (the last position in the last block) draws
  only that part, and gets exactly the elements the full pass would get;
- a seed's masks do not depend on which other seeds train beside it, a resumed run replays
  nothing, and a CPU and a GPU draw the same masks.

The bits of an element are two rounds of a 32-bit integer mixer (xorshift-multiply, the
"lowbias32" constants of C. Wellons' hash prospector) keyed by a 64-bit SplitMix64 hash of
(stream, draw, site). An element is kept when its 32 bits, read as an unsigned number, are at
least ``round(p * 2**32)``: the dropout rate is ``p`` to within ``2**-32``.

On a CPU the integer chain of a site (some 25 passes over its elements in eager mode) is compiled
by ``torch.compile`` into one loop, which makes drawing the masks 10 to 40 times faster; the
arithmetic is exact, so the masks are the same, bit for bit (a test holds the two equal: the
compiled C++ multiplies int32 words, whose wrap-around C++ leaves to the compiler, so the test
checks it on the compiler at hand). Where
compiling fails (no C++ compiler, an unsupported platform), the eager chain is used, with a
warning; ``ACE_FUSED_MASKS=0`` asks for it. Other devices draw eagerly.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Iterable, Sequence

import torch

from ._dispatch import dispatch_mode_active
from .fastpath import mask_shapes
from .models import TransformerConfig
from .results import StoreError

__all__ = [
    "MASK_GENERATOR",
    "DropoutStreams",
    "dropout_seed",
    "site_keys",
    "element_bits",
    "site_mask",
    "FUSED_MASKS_VARIABLE",
    "PROFILE_LABEL",
]

# Recorded in the identity of every run with dropout: masks of another generator are another run.
MASK_GENERATOR = "splitmix64-keyed lowbias32x2"

_M64 = (1 << 64) - 1
_GOLDEN64 = 0x9E3779B97F4A7C15
_GOLDEN32 = 0x9E3779B1
_MIX1, _MIX2 = 0x7FEB352D, 0x846CA68B
_SPLIT1, _SPLIT2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _signed(v: int, bits: int) -> int:
    """Two's-complement reading of an unsigned ``bits``-bit integer (torch has no unsigned arithmetic)."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _srl(x: torch.Tensor, k: int, bits: int) -> torch.Tensor:
    """Logical right shift of a signed integer tensor holding ``bits``-bit words."""
    return (x >> k) & ((1 << (bits - k)) - 1)


def dropout_seed(seed: int, start_epoch: int) -> int:
    """Stream key of seed ``seed``'s dropout masks in a run that starts at ``start_epoch``.

    A branch (a run started from a snapshot) gets a stream of its own, so it does not replay the
    masks of epoch 0.
    """
    return seed + 1 if start_epoch == 0 else (seed + 1) * 100_003 + start_epoch


def _splitmix64(z: torch.Tensor) -> torch.Tensor:
    """SplitMix64's output function on int64 tensors (wrapping arithmetic)."""
    z = (z ^ _srl(z, 30, 64)) * _signed(_SPLIT1, 64)
    z = (z ^ _srl(z, 27, 64)) * _signed(_SPLIT2, 64)
    return z ^ _srl(z, 31, 64)


def site_keys(streams: torch.Tensor, draw: int, n_sites: int, offsets: torch.Tensor | None = None) -> torch.Tensor:
    """The two 32-bit key words of every (stream, site) at draw ``draw``: int32 (S, n_sites, 2).

    ``streams`` (S,) int64 stream keys. The 64-bit hash of (stream, draw, site) gives both words.
    ``offsets`` (S,) int64: streams that have drawn more than ``draw`` (a stack whose models joined
    at different steps) are at draw ``draw + offsets``; the integer sum is exact, so a stream's keys
    are the same whichever streams draw beside it.
    """
    site = torch.arange(n_sites, dtype=torch.int64, device=streams.device)
    at = streams * _signed(_GOLDEN64, 64) if offsets is None else streams * _signed(_GOLDEN64, 64) + offsets
    z = _splitmix64(at[:, None] + _signed(draw, 64))
    z = _splitmix64(z + (site[None] + 1) * _signed(_GOLDEN64, 64))
    words = torch.stack([z & 0xFFFFFFFF, _srl(z, 32, 64)], dim=-1)
    return torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)


def _mix32(x: torch.Tensor, tmp: torch.Tensor) -> None:
    """One round of the lowbias32 mixer, in place on int32 ``x`` (``tmp``: scratch of its shape)."""
    for shift, mult in ((16, _MIX1), (15, _MIX2)):
        torch.bitwise_right_shift(x, shift, out=tmp)
        tmp &= (1 << (32 - shift)) - 1
        x ^= tmp
        x *= _signed(mult, 32)
    torch.bitwise_right_shift(x, 16, out=tmp)
    tmp &= 0xFFFF
    x ^= tmp


def element_bits(keys: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """32 random bits (int32) per stream and element: (S, *index.shape).

    ``keys`` (S, 2) int32 key words of one site, ``index`` int32 positions of the elements in the
    site's full mask.
    """
    shape = (keys.shape[0],) + (1,) * index.ndim
    x = index[None] * _signed(_GOLDEN32, 32)
    x = x ^ keys[:, 0].view(shape)
    tmp = torch.empty_like(x)
    _mix32(x, tmp)
    x += keys[:, 1].view(shape)
    _mix32(x, tmp)
    return x


def site_mask(keys: torch.Tensor, positions: torch.Tensor, threshold: int, scale: float) -> torch.Tensor:
    """One site's float mask (S, N): ``scale`` where an element is kept, 0 where it is dropped.

    ``keys`` (S, 2) the site's key words, ``positions`` (N,) int32 positions of the elements in
    the site's full mask, ``threshold`` the signed form of the unsigned cut ``round(p * 2**32)``.
    """
    bits = element_bits(keys, positions)
    bits ^= -(1 << 31)  # unsigned order as signed order
    return torch.where(bits >= threshold, scale, 0.0)


PROFILE_LABEL = "ace::dropout_masks"  # the profiler range around a step's masks
FUSED_MASKS_VARIABLE = "ACE_FUSED_MASKS"  # "0": draw the masks eagerly, without compiling
_compiled_site_mask: object = None  # the compiled site_mask; False once compiling has failed


def _draw_site(keys: torch.Tensor, positions: torch.Tensor, threshold: int, scale: float) -> torch.Tensor:
    """:func:`site_mask`, by its compiled form on a CPU where compiling works."""
    global _compiled_site_mask
    fuse = (
        positions.device.type == "cpu"
        and os.environ.get(FUSED_MASKS_VARIABLE, "1") != "0"
        and not dispatch_mode_active()
    )
    if fuse and _compiled_site_mask is not False:
        try:
            if _compiled_site_mask is None:
                _compiled_site_mask = torch.compile(site_mask, dynamic=True)
            return _compiled_site_mask(keys, positions, threshold, scale)
        except Exception as exc:  # no C++ compiler, an unsupported platform: the eager chain is exact too
            _compiled_site_mask = False
            warnings.warn(
                f"compiling the dropout masks failed ({type(exc).__name__}: {exc}); they are drawn "
                f"eagerly from now on, with the same values but more slowly. Set {FUSED_MASKS_VARIABLE}=0 "
                "to skip the attempt.",
                RuntimeWarning,
                stacklevel=2,
            )
    return site_mask(keys, positions, threshold, scale)


@functools.lru_cache(maxsize=256)
def _positions(full: torch.Size, used: torch.Size, device: torch.device) -> torch.Tensor:
    """Flat positions in a mask of shape ``full`` of its trailing part of shape ``used`` (int32)."""
    if full.numel() >= 1 << 31:
        raise ValueError(f"a dropout mask of {full.numel()} elements is too large; train with smaller batches.")
    index = torch.zeros(used, dtype=torch.int64, device=device)
    stride = 1
    for d in reversed(range(len(full))):
        offset = torch.arange(full[d] - used[d], full[d], dtype=torch.int64, device=device) * stride
        index += offset.view([-1 if i == d else 1 for i in range(len(full))])
        stride *= full[d]
    return index.to(torch.int32)


class DropoutStreams:
    """One dropout stream per seed, drawn by the counter-based generator of this module.

    Each :meth:`draw` returns one training step's masks, each ``keep / (1 - p)`` with ``keep``
    Bernoulli(1 - p), which is what ``F.dropout`` multiplies by. Every stream counts its own draws:
    streams that began at different steps (:meth:`joined`, a model joining a stack) each continue
    where they are.
    """

    def __init__(self, p: float, seeds: Iterable[int], start_epoch: int = 0) -> None:
        if not 0 < p < 1 or round(p * 2**32) >= 2**32:
            raise ValueError(f"dropout probability must lie in (0, 1) (at most 1 - 2**-33), got {p}.")
        self.p = float(p)
        self.seeds = tuple(int(s) for s in seeds)
        self.streams = [dropout_seed(s, start_epoch) for s in self.seeds]
        self.counts = [0] * len(self.seeds)  # steps drawn so far by each stream
        # Dropped when the bits, read unsigned, fall below this; compared in signed form.
        self._threshold = _signed(round(self.p * 2**32) ^ (1 << 31), 32)

    def __len__(self) -> int:
        return len(self.seeds)

    def draw(
        self,
        model_cfg: TransformerConfig,
        batch: int,
        length: int,
        device,
        *,
        last_only: bool = True,
        dtype: torch.dtype = torch.float32,
    ) -> list[torch.Tensor]:
        """The masks of one training step on (batch, length) tokens: a list of (S, *shape) tensors.

        Each element is the one the full forward pass on these tokens would get; with
        ``last_only`` only the elements the last-position pass uses are drawn. In a ``dtype``
        coarser than float32 the scale ``1 / (1 - p)`` is rounded (bf16: 1.109375 for p = 0.1);
        the engine draws float32 masks and rounds only the products.
        """
        with torch.profiler.record_function(PROFILE_LABEL):  # a compiled kernel is otherwise invisible to it
            return self._draw(model_cfg, batch, length, torch.device(device), last_only, dtype)

    def _draw(
        self,
        model_cfg: TransformerConfig,
        batch: int,
        length: int,
        device: torch.device,
        last_only: bool,
        dtype: torch.dtype,
    ) -> list[torch.Tensor]:
        full = mask_shapes(model_cfg, batch, length)
        used = mask_shapes(model_cfg, batch, length, last_only=True) if last_only else full
        draw = min(self.counts, default=0)
        streams, ahead = self._stream_keys(device, draw)
        keys = site_keys(streams, draw, len(full), ahead)
        scale = 1.0 / (1.0 - self.p)
        masks = []
        for site, (f, u) in enumerate(zip(full, used)):
            # A fresh contiguous copy: a strided view (or one at an offset) would compile a kernel per site.
            site_key = keys[:, site].clone(memory_format=torch.contiguous_format)
            mask = _draw_site(site_key, _positions(f, u, device).flatten(), self._threshold, scale)
            masks.append(mask.view(len(self), *u).to(dtype))
        self.counts = [c + 1 for c in self.counts]
        return masks

    def _stream_keys(self, device: torch.device, draw: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The stream keys and (None when all streams are at ``draw``) the draws each is ahead, on ``device``."""
        # Kept on the device: one copy per run (or per change of the stack), not one per step.
        ahead = tuple(c - draw for c in self.counts)
        if getattr(self, "_keys_at", None) != (device, ahead):
            self._keys = torch.tensor(self.streams, dtype=torch.int64).to(device)
            self._ahead = None if not any(ahead) else torch.tensor(ahead, dtype=torch.int64).to(device)
            self._keys_at = (device, ahead)
        return self._keys, self._ahead

    def subset(self, keep: Sequence[int]) -> DropoutStreams:
        """The streams of the seeds at positions ``keep``, at the draws they have reached."""
        new = DropoutStreams.__new__(DropoutStreams)
        new.p, new._threshold = self.p, self._threshold
        new.seeds = tuple(self.seeds[j] for j in keep)
        new.streams = [self.streams[j] for j in keep]
        new.counts = [self.counts[j] for j in keep]
        return new

    @classmethod
    def joined(cls, parts: Sequence[DropoutStreams]) -> DropoutStreams:
        """The streams of ``parts`` side by side, each at the draws it has reached (one dropout rate)."""
        if not parts or len({part.p for part in parts}) != 1:
            raise ValueError(
                f"streams of dropout rates {[part.p for part in parts]} cannot be joined: a stack has one "
                "architecture, so one rate; join at least one set of streams."
            )
        new = DropoutStreams.__new__(DropoutStreams)
        new.p, new._threshold = parts[0].p, parts[0]._threshold
        new.seeds = tuple(s for part in parts for s in part.seeds)
        new.streams = [s for part in parts for s in part.streams]
        new.counts = [c for part in parts for c in part.counts]
        return new

    def state(self) -> torch.Tensor:
        """Each stream's key and the draws it has reached, (S, 2) int64, for a checkpoint."""
        rows = [[s, c] for s, c in zip(self.streams, self.counts)]
        return torch.tensor(rows, dtype=torch.int64).reshape(len(self), 2)

    def load_state(self, state: torch.Tensor) -> None:
        """Continue from :meth:`state`; refuses the state of other streams."""
        if state.dtype != torch.int64 or state.shape != (len(self), 2):
            raise StoreError(
                f"dropout state of shape {tuple(state.shape)} ({state.dtype}) does not fit {len(self)} counter "
                "streams; it was written by another mask generator. Delete the run to retrain it."
            )
        streams, draws = state.cpu().T.tolist() if len(self) else ([], [])
        if streams != self.streams or any(d < 0 for d in draws):
            raise StoreError(
                f"dropout state of streams {streams} at draws {draws}; this run draws from {self.streams}."
            )
        self.counts = [int(d) for d in draws]
