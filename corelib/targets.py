"""Ready-made read-outs for :func:`corelib.ace.extract_from_model`: functions of a model's output.

Each returns ``target(output) -> (batch, K)`` or ``(batch,)``. ``output`` may be a tensor of
logits (batch, pos, vocab), as our toy models return, or anything with a ``.logits`` attribute,
as Hugging Face models return.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["logits_at", "logit_difference", "word_loss", "single_token_ids"]


def _logits(output: Any) -> torch.Tensor:
    logits = getattr(output, "logits", output)
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3:
        raise TypeError("the model's output is not logits (batch, pos, vocab) nor has a .logits attribute.")
    return logits


def logits_at(position: int = -1) -> Callable[[Any], torch.Tensor]:
    """Every logit at ``position`` (default: the last): (batch, vocab).

    Each output is one backward pass per batch in :func:`corelib.ace.extract_from_model`: fine
    for a toy vocabulary, far too many for a language model's (use :func:`logit_difference`).
    """
    return lambda output: _logits(output)[:, position]


def single_token_ids(tokenizer: Any, words: Sequence[str]) -> list[int]:
    """The id of each word, which must be exactly one token (``tokenizer`` a Hugging Face
    tokenizer, or an object with a ``.tokenizer``, such as :class:`corelib.lm.LanguageModel`)."""
    tok = getattr(tokenizer, "tokenizer", tokenizer)
    ids = []
    for word in words:
        got = tok.encode(word, add_special_tokens=False)
        if len(got) != 1:
            raise ValueError(
                f"{word!r} is {len(got)} tokens ({got}); a read-out needs single tokens "
                "(many tokenizers want a leading space, e.g. ' are')."
            )
        ids.append(int(got[0]))
    return ids


def logit_difference(
    tokenizer: Any, plus: Sequence[str], minus: Sequence[str], position: int = -1
) -> Callable[[Any], torch.Tensor]:
    """``sum(logits[plus]) - sum(logits[minus])`` at ``position``: (batch,), e.g. the agreement margin
    ``logit_difference(lm, [" are", " were"], [" is", " was"])``."""
    if not plus or not minus:
        raise ValueError("give at least one token on each side of the difference.")
    up, down = single_token_ids(tokenizer, plus), single_token_ids(tokenizer, minus)

    def target(output: Any) -> torch.Tensor:
        logits = _logits(output)[:, position]
        return logits[:, up].sum(-1) - logits[:, down].sum(-1)

    return target


def word_loss(tokenizer: Any, word: str, position: int = -1) -> Callable[[Any], torch.Tensor]:
    """The language-model loss of ``word`` as the next token at ``position``, ``-log p(word)``:
    (batch,). A core for it holds what the model's confidence in that word depends on (e.g. the
    loss of " the" after a preposition), softmax normalisation over the whole vocabulary included."""
    (token,) = single_token_ids(tokenizer, [word])

    def target(output: Any) -> torch.Tensor:
        return -torch.log_softmax(_logits(output)[:, position].float(), dim=-1)[:, token]

    return target
