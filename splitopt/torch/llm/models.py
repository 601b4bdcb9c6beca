"""Decoders built from a config (:class:`splitopt.torch.llm.options.DecoderSpec`; random
weights from a seed, no download) and cut into the parts of an llm instance: the
embedding, one part per block, the head, each runnable alone with its own state.

* the embedding turns token ids into hidden states (GPT-2: plus the position embedding of
  the positions it has seen);
* a block holds its own KV cache (a ``DynamicCache`` of one layer: the block's attention
  is renumbered as layer 0 of it) and computes its own causal mask and, for Llama, its
  rotary position embedding from that cache's length, exactly as the unsplit model
  computes them for the same positions, so a stage of parts gives the unsplit model's
  numbers;
* the head takes the last position's hidden state through the final norm and the output
  matrix and returns the greedy token (``argmax``), shape ``(1, 1)``.

The same seed builds the same weights in every process (``torch.manual_seed`` before the
model is built; standard deviation :data:`INIT_STD`). The model runs in float32 on the CPU, ``eval()``.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Sequence

import torch

from splitopt.torch.llm.options import DecoderSpec

#: the weight, KV cache and hidden-state bits of the models built here (float32)
MODEL_BITS = 32
#: the standard deviation of the random weights (the configs' ``initializer_range``): at
#: the usual 0.02 a random decoder's greedy tokens repeat one token, at 0.3 they vary, so
#: that equal tokens say something
INIT_STD = 0.3


def build_model(spec: DecoderSpec, seed: int) -> Any:
    """The Hugging Face causal LM of ``spec`` with seeded random weights (no download)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    model: Any
    common: dict[str, Any] = {"initializer_range": INIT_STD, "attn_implementation": "sdpa"}
    if spec.arch == "gpt2":
        config: Any = GPT2Config(n_embd=spec.hidden, n_layer=spec.layers, n_head=spec.heads, n_inner=spec.intermediate,
                            vocab_size=spec.vocab, n_positions=spec.max_context, bos_token_id=spec.vocab - 1,
                            eos_token_id=spec.vocab - 1, **common)
        model = GPT2LMHeadModel(config)
    else:
        config = LlamaConfig(hidden_size=spec.hidden, num_hidden_layers=spec.layers,
                             num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads,
                             intermediate_size=spec.intermediate, vocab_size=spec.vocab,
                             max_position_embeddings=spec.max_context, tie_word_embeddings=False,
                             **common)
        model = LlamaForCausalLM(config)
    return model.eval()


def prompt_ids(spec: DecoderSpec, tokens: int, seed: int) -> torch.Tensor:
    """A prompt of ``tokens`` ids, ``(1, tokens)`` int64, drawn from ``seed``."""
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randint(0, spec.vocab, (1, tokens), generator=g)


def parameter_count(model: Any) -> int:
    """Weights of the model, a tied matrix once."""
    return sum(p.numel() for p in model.parameters())


class Embedding:
    """Token ids ``(1, T)`` -> hidden states ``(1, T, hidden)`` at the next ``T`` positions."""

    def __init__(self, model: Any, arch: str) -> None:
        self.arch = arch
        self.wte = model.transformer.wte if arch == "gpt2" else model.model.embed_tokens
        self.wpe = model.transformer.wpe if arch == "gpt2" else None
        self.seen = 0

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.wte(ids)
        if self.wpe is not None:
            positions = (torch.arange(ids.shape[1]) + self.seen).unsqueeze(0)
            h = h + self.wpe(positions)
        self.seen += ids.shape[1]
        return h

    def reset(self) -> None:
        self.seen = 0

    def drop_last(self) -> None:
        self.seen -= 1


class Block:
    """One decoder block with its own KV cache (module docstring)."""

    def __init__(self, model: Any, arch: str, index: int) -> None:
        from transformers import DynamicCache

        self.model, self.arch = model, arch
        self.layer = model.transformer.h[index] if arch == "gpt2" else model.model.layers[index]
        (self.layer.attn if arch == "gpt2" else self.layer.self_attn).layer_idx = 0
        self._new_cache = DynamicCache
        self.cache = DynamicCache()

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        from transformers.masking_utils import create_causal_mask

        past = self.cache.get_seq_length()
        positions = (torch.arange(h.shape[1]) + past).unsqueeze(0)
        mask = create_causal_mask(config=self.model.config, inputs_embeds=h, attention_mask=None, cache=self.cache,
                                  position_ids=positions)
        if self.arch == "gpt2":
            return self.layer(h, self.cache, mask, use_cache=True, position_ids=positions)
        rotary = self.model.model.rotary_emb(h, position_ids=positions)
        return self.layer(h, attention_mask=mask, position_ids=positions, cache=self.cache, use_cache=True,
                          position_embeddings=rotary)

    def reset(self) -> None:
        self.cache = self._new_cache()

    def drop_last(self) -> None:
        self.cache.crop(-1)


class Head:
    """Hidden states ``(1, T, hidden)`` -> the greedy next token ``(1, 1)`` from the last
    position (final norm, output matrix, argmax)."""

    def __init__(self, model: Any, arch: str) -> None:
        self.norm = model.transformer.ln_f if arch == "gpt2" else model.model.norm
        self.lm_head = model.lm_head

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        logits = self.lm_head(self.norm(h[:, -1:]))
        return logits.argmax(-1)

    def reset(self) -> None:
        pass

    def drop_last(self) -> None:
        pass


def decoder_parts(model: Any, spec: DecoderSpec) -> list[tuple[str, Any]]:
    """``(layer name, part)`` in the instance's order: ``embedding``, ``block_0`` ..
    ``block_{N-1}``, ``head`` (the names of :func:`splitopt.families.llm.examples.decoder_layers`)."""
    parts: list[tuple[str, Any]] = [("embedding", Embedding(model, spec.arch))]
    parts += [(f"block_{i}", Block(model, spec.arch, i)) for i in range(spec.layers)]
    parts.append(("head", Head(model, spec.arch)))
    return parts


def run_parts(parts: Sequence[Any], x: torch.Tensor) -> torch.Tensor:
    """``x`` through ``parts`` in order."""
    for part in parts:
        x = part(x)
    return x


def reference_tokens(spec: DecoderSpec, seed: int, prompt: torch.Tensor, generated: int) -> list[int]:
    """The unsplit model's greedy tokens: its own forward with its own KV cache, the
    prompt at once, then one token at a time."""
    from transformers import DynamicCache

    model = build_model(spec, seed)
    cache = DynamicCache(config=model.config)
    tokens: list[int] = []
    x = prompt
    with torch.no_grad():
        for _ in range(generated):
            out = model(input_ids=x, cache=cache, use_cache=True)
            token = int(out.logits[0, -1].argmax())
            tokens.append(token)
            x = torch.tensor([[token]])
    return tokens
