"""What ``splitopt profile`` and ``splitopt run`` take for the llm family, checked
without torch (one line naming the option): the decoder models by name and the options.

Models (Hugging Face architectures built from a config, random weights, no download):

* ``gpt2``: the configuration of ``openai-community/gpt2`` (12 blocks, hidden 768, 12
  heads, vocabulary 50,257, 1,024 positions);
* ``gpt2-l{layers}-h{hidden}-a{heads}-v{vocabulary}[-i{intermediate}]``: a GPT-2 of that
  size (MLP ``4 x hidden`` unless ``-i`` says), 1,024 positions, e.g. ``gpt2-l4-h256-a4-v4096``;
* ``llama-l{layers}-h{hidden}-a{heads}-kv{kv heads}-i{intermediate}-v{vocabulary}``: a
  Llama-architecture decoder (grouped-query attention with ``kv`` key/value heads, SwiGLU
  MLP, RMSNorm, rotary positions, untied head), 2,048 positions, e.g.
  ``llama-l6-h384-a6-kv2-i1024-v4096``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from splitopt.core.errors import InvalidOption
from splitopt.core.options import check_count, check_number, check_seed

#: the public configuration the name ``gpt2`` stands for
GPT2_SOURCE = "openai-community/gpt2"
#: the forms of a model name, for messages
MODEL_FORMS = ("gpt2", "gpt2-l{layers}-h{hidden}-a{heads}-v{vocab}[-i{intermediate}]",
               "llama-l{layers}-h{hidden}-a{heads}-kv{kv_heads}-i{intermediate}-v{vocab}")
#: positions (the longest context) of the configs built by name
GPT2_POSITIONS, LLAMA_POSITIONS = 1024, 2048
_KEYS = {"l": "layers", "h": "hidden", "a": "heads", "kv": "kv_heads", "i": "intermediate", "v": "vocab"}
_NEEDED = {"gpt2": ("l", "h", "a", "v"), "llama": ("l", "h", "a", "kv", "i", "v")}
_ALLOWED = {"gpt2": ("l", "h", "a", "v", "i"), "llama": ("l", "h", "a", "kv", "i", "v")}
_LIMITS = {"layers": (1, 256), "hidden": (8, 16384), "heads": (1, 256), "kv_heads": (1, 256),
           "intermediate": (1, 65536), "vocab": (2, 2**20)}


@dataclass(frozen=True)
class DecoderSpec:
    """A decoder by name: its architecture (``gpt2`` or ``llama``) and sizes."""

    name: str
    arch: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    max_context: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def config(self) -> dict[str, Any]:
        """The numbers :func:`splitopt.families.llm.examples.decoder_layers` takes."""
        out: dict[str, Any] = {"hidden": self.hidden, "layers": self.layers, "heads": self.heads,
                               "kv_heads": self.kv_heads, "head_dim": self.head_dim,
                               "intermediate": self.intermediate, "vocab": self.vocab,
                               "max_context": self.max_context}
        if self.arch == "gpt2":
            out.update(tied=True, mlp="plain", bias=True, positions=self.max_context)
        else:
            out.update(tied=False, mlp="gated")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arch": self.arch, "layers": self.layers, "hidden": self.hidden,
                "heads": self.heads, "kv_heads": self.kv_heads, "intermediate": self.intermediate,
                "vocab": self.vocab, "max_context": self.max_context}


def parse_model(name: str, option: str = "MODEL") -> DecoderSpec:
    """The decoder ``name`` stands for (module docstring); InvalidOption (one line naming
    ``option``) for a name of no such form or sizes that do not make a decoder."""
    if name == "gpt2":
        return DecoderSpec(name, "gpt2", 12, 768, 12, 12, 3072, 50257, GPT2_POSITIONS)
    arch, _, rest = name.partition("-")
    forms = "; ".join(MODEL_FORMS)
    if arch not in _NEEDED or not rest:
        raise InvalidOption(f"{option}: unknown decoder model '{name}' (forms: {forms})")
    values: dict[str, int] = {}
    for token in rest.split("-"):
        m = re.fullmatch(r"([a-z]+)([0-9]+)", token)
        if m is None or m.group(1) not in _ALLOWED[arch] or _KEYS[m.group(1)] in values:
            raise InvalidOption(f"{option}: '{token}' in '{name}' is not one of {arch}'s sizes (forms: {forms})")
        values[_KEYS[m.group(1)]] = int(m.group(2))
    missing = [f"-{k}" for k in _NEEDED[arch] if _KEYS[k] not in values]
    if missing:
        raise InvalidOption(f"{option}: '{name}' lacks {', '.join(missing)} (forms: {forms})")
    for key, (low, high) in _LIMITS.items():
        if key in values and not low <= values[key] <= high:
            raise InvalidOption(f"{option}: {key} {values[key]} in '{name}' is outside [{low}, {high}]")
    hidden, heads = values["hidden"], values["heads"]
    kv = values.get("kv_heads", heads)
    if hidden % heads or heads % kv:
        raise InvalidOption(f"{option}: '{name}': the heads ({heads}) must divide hidden ({hidden}) and the kv "
                            f"heads ({kv}) the heads")
    return DecoderSpec(name, arch, values["layers"], hidden, heads, kv, values.get("intermediate", 4 * hidden),
                       values["vocab"], GPT2_POSITIONS if arch == "gpt2" else LLAMA_POSITIONS)


def is_model_name(name: str) -> bool:
    """Whether ``name`` has the form of a decoder model (its sizes unchecked)."""
    return name == "gpt2" or re.fullmatch(r"(gpt2|llama)(-[a-z]+[0-9]+)+", name) is not None


def parse_lengths(text: str | None, option: str) -> tuple[int, ...] | None:
    """``"16,32,64"`` -> ``(16, 32, 64)``: token counts in increasing order; None: not
    given. InvalidOption (one line) otherwise."""
    if text is None:
        return None
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise InvalidOption(f"{option}: '{text}' is not a comma-separated list of token counts") from None
    if not values or any(v < 1 for v in values) or any(b <= a for a, b in zip(values, values[1:])):
        raise InvalidOption(f"{option}: '{text}': give positive token counts in increasing order")
    return values


def parse_devices(text: str) -> tuple[str, ...]:
    """``"host,host2"`` -> the device names (each a process on this host)."""
    names = tuple(n.strip() for n in text.split(","))
    for n in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", n):
            raise InvalidOption(f"--devices: '{n}' is not a device name (letters, digits, _ . -)")
    if len(set(names)) != len(names):
        raise InvalidOption(f"--devices: '{text}' names a device twice")
    return names


@dataclass(frozen=True)
class LlmProfileOptions:
    """``splitopt profile MODEL`` of a decoder: the devices (comma-separated names, each a
    process on this host with this host's measured times), the scenario (prompt and
    generated tokens), the prompt lengths and contexts measured (None: spread around the
    scenario, :func:`splitopt.torch.llm.profile.default_grids`), timed runs per
    measurement (median, after two warm-up runs), torch's intra-op threads (the runs use
    the same), the weights' seed and the instance's name."""

    devices: str = "host,host2"
    prompt_tokens: int = 64
    generated_tokens: int = 32
    prompt_lengths: str | None = None
    contexts: str | None = None
    repeats: int = 5
    torch_threads: int = 1
    seed: int = 0
    name: str | None = None

    def __post_init__(self) -> None:
        parse_devices(self.devices)
        check_count(self.prompt_tokens, "--prompt-tokens", high=2**16)
        check_count(self.generated_tokens, "--generated-tokens", high=2**16)
        parse_lengths(self.prompt_lengths, "--prompt-lengths")
        contexts = parse_lengths(self.contexts, "--contexts")
        if contexts is not None and len(contexts) < 2:
            raise InvalidOption(f"--contexts: '{self.contexts}': give at least two contexts (a line is fitted)")
        check_count(self.repeats, "--repeats", high=1000)
        check_count(self.torch_threads, "--torch-threads", high=256)
        check_seed(self.seed)


@dataclass(frozen=True)
class LlmRunOptions:
    """``splitopt run`` of an llm plan: timed generations (medians) after ``warmup``
    untimed ones, torch's intra-op threads per process (None: those of the profile), the
    address the stage processes listen on, the seconds a peer may stay silent and the
    whole run may take."""

    repeats: int = 3
    warmup: int = 1
    torch_threads: int | None = None
    host: str = "127.0.0.1"
    timeout: float = 60.0
    run_timeout: float = 900.0

    def __post_init__(self) -> None:
        from splitopt.netrun.setup import check_host

        check_count(self.repeats, "--repeats", high=1000)
        check_count(self.warmup, "--warmup", low=0, high=1000)
        if self.torch_threads is not None:
            check_count(self.torch_threads, "--torch-threads", high=256)
        check_number(self.timeout, "--timeout", 0.0, 86400.0, low_open=True)
        check_number(self.run_timeout, "--run-timeout", 0.0, 7 * 86400.0, low_open=True)
        check_host(self.host)
