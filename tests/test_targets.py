"""Ready-made read-outs: the values they compute, on tensors and on Hugging Face style outputs."""

from types import SimpleNamespace

import pytest
import torch

from corelib.targets import logit_difference, logits_at, single_token_ids, word_loss


class _Tokenizer:
    vocab = {" are": [3], " were": [4], " is": [1], " was": [2], " them": [5, 6]}

    def encode(self, text, add_special_tokens=False):
        return self.vocab[text]


def test_logit_difference_is_the_margin_at_the_position():
    logits = torch.randn(5, 3, 7)
    margin = logit_difference(_Tokenizer(), [" are", " were"], [" is", " was"])
    want = logits[:, -1, 3] + logits[:, -1, 4] - logits[:, -1, 1] - logits[:, -1, 2]
    torch.testing.assert_close(margin(logits), want)
    torch.testing.assert_close(margin(SimpleNamespace(logits=logits)), want)  # a Hugging Face output
    at_first = logit_difference(SimpleNamespace(tokenizer=_Tokenizer()), [" are"], [" is"], position=0)
    torch.testing.assert_close(at_first(logits), logits[:, 0, 3] - logits[:, 0, 1])
    torch.testing.assert_close(logits_at(1)(logits), logits[:, 1])


def test_multi_token_words_and_non_logits_are_refused():
    with pytest.raises(ValueError, match=r"' them' is 2 tokens \(\[5, 6\]\)"):
        single_token_ids(_Tokenizer(), [" are", " them"])
    with pytest.raises(ValueError, match="at least one token on each side"):
        logit_difference(_Tokenizer(), [], [" is"])
    with pytest.raises(TypeError, match="not logits"):
        logits_at()(torch.randn(5, 7))


def test_word_loss_is_the_cross_entropy_of_the_word():
    logits = torch.randn(6, 2, 7)
    loss = word_loss(_Tokenizer(), " were")(SimpleNamespace(logits=logits))
    want = torch.nn.functional.cross_entropy(logits[:, -1], torch.full((6,), 4), reduction="none")
    torch.testing.assert_close(loss, want)
    with pytest.raises(ValueError, match="2 tokens"):
        word_loss(_Tokenizer(), " them")
