"""llm instances as JSON data: decoder parts from a model config (what
``instances/make_llm_instances.py`` writes the public configs with), and small random
instances for the contract suites and tests.

A config (the numbers of a Hugging Face ``config.json``)::

    {"hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 8, "head_dim": 128,
     "intermediate": 14336, "vocab": 128256, "tied": False, "max_context": 131072,
     "mlp": "gated",                      # gated (SwiGLU: gate, up, down) or plain (up, down)
     "bias": False,                       # attention and MLP biases (GPT-2, Qwen's q/k/v)
     "positions": 0,                      # learned position embeddings (GPT-2: 1024)
     "experts": 0, "active_experts": 0}   # a mixture of experts: every expert held, active ones read

Per token, every weight of a linear map is one MAC; a block's attention over the context
is the family's own term (``settings.model``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from splitopt.families.llm.settings import PROBLEM


def block_weights(c: Mapping[str, Any]) -> tuple[int, int]:
    """(weights held, weights read per token) of one decoder block."""
    h, hd = c["hidden"], c.get("head_dim") or c["hidden"] // c["heads"]
    attention = h * c["heads"] * hd * 2 + h * c["kv_heads"] * hd * 2
    if c.get("bias"):
        attention += (c["heads"] + 2 * c["kv_heads"]) * hd + h
    matrices = 3 if c.get("mlp", "gated") == "gated" else 2
    expert = matrices * h * c["intermediate"] + (c["intermediate"] + h if c.get("bias") else 0)
    norms = 2 * h * (2 if c.get("bias") else 1)
    experts = c.get("experts", 0)
    if experts:
        router = h * experts
        return attention + norms + router + experts * expert, attention + norms + router + c["active_experts"] * expert
    return attention + norms + expert, attention + norms + expert


def decoder_layers(c: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, int]]:
    """The graph input (a token id), the parts (embedding, ``block_0`` .. ``block_{N-1}``,
    head) and the weights each block reads per token where not all (mixture of experts)."""
    h, vocab = c["hidden"], c["vocab"]
    held, read = block_weights(c)
    layers = [{"name": "embedding", "op": "embedding", "inputs": ["tokens"], "macs": 0.0,
               "weights": vocab * h + c.get("positions", 0) * h, "output_shape": [h]}]
    for i in range(c["layers"]):
        layers.append({"name": f"block_{i}", "op": "block", "inputs": [layers[-1]["name"]], "macs": float(read),
                       "weights": held, "output_shape": [h]})
    norm = h * (2 if c.get("bias") else 1)
    layers.append({"name": "head", "op": "head", "inputs": [layers[-1]["name"]], "macs": float(vocab * h + norm),
                   "weights": vocab * h + norm, "output_shape": [vocab]})
    active = {f"block_{i}": read for i in range(c["layers"])} if read != held else {}
    return {"name": "tokens", "shape": [1], "bits": 32}, layers, active


def model_settings(c: Mapping[str, Any], active: Mapping[str, int]) -> dict[str, Any]:
    """``settings.model`` of a config."""
    out = {"attention_heads": c["heads"], "kv_heads": c["kv_heads"],
           "head_dim": c.get("head_dim") or c["hidden"] // c["heads"], "max_context": c.get("max_context"),
           "tied_embeddings": bool(c.get("tied", False))}
    if active:
        out["active_weights"] = dict(active)
    return out


def decoder_instance_data(name: str, config: Mapping[str, Any], devices: Sequence[Mapping[str, Any]],
                          links: Sequence[Mapping[str, Any]], description: str = "",
                          source: Mapping[str, Any] | None = None, **settings: Any) -> dict[str, Any]:
    """An llm instance's JSON data: the config's parts over ``devices`` and ``links``, with
    ``settings`` (the scenario, topology, precisions, limits) beside the model's shape."""
    token, layers, active = decoder_layers(config)
    return {"format": "splitopt-instance/1", "name": name, "description": description,
            "source": dict(source or {}), "graph": {"inputs": [token], "layers": layers},
            "devices": [dict(d) for d in devices], "links": [dict(link) for link in links],
            "settings": {"problem": PROBLEM, "objective": "token_latency", "model": model_settings(config, active),
                         **settings}}


def _loguniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def _random_config(rng: np.random.Generator) -> dict[str, Any]:
    heads = int(rng.choice([2, 4]))
    hidden = heads * int(rng.choice([8, 16, 32]))
    config = {"hidden": hidden, "layers": int(rng.integers(1, 5)), "heads": heads,
              "kv_heads": int(rng.choice([1, heads])), "intermediate": 2 * hidden, "vocab": int(rng.choice([64, 256])),
              "tied": bool(rng.random() < 0.3), "max_context": int(rng.choice([256, 4096])),
              "mlp": str(rng.choice(["gated", "plain"]))}
    if rng.random() < 0.2:
        config.update(experts=4, active_experts=2)
    return config


def _random_devices(rng: np.random.Generator, count: int, need_bytes: float) -> list[dict[str, Any]]:
    """Devices whose memory is sometimes loose and sometimes binds (``need_bytes``: the
    model and its cache at 16 bits)."""
    devices = []
    for k in range(count):
        bits = [[16], [8, 16], [4, 8, 16], [4, 8]][int(rng.integers(0, 4))]
        loose = rng.random() < 0.4
        devices.append({"name": f"d{k}", "mac_per_s": _loguniform(rng, 1e8, 1e11),
                        "offchip_bytes_per_s": _loguniform(rng, 1e7, 1e10), "onchip_bytes": 0,
                        "memory_bytes": float(int(need_bytes * (2.0 if loose else rng.uniform(0.15, 1.0)))),
                        "bit_widths": bits})
    return devices


def _random_links(rng: np.random.Generator, devices: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    links = []
    for a in devices:
        for b in devices:
            if a is not b and rng.random() < 0.8:
                links.append({"source": a["name"], "target": b["name"],
                              "bandwidth_bits_per_s": _loguniform(rng, 1e5, 1e9),
                              "latency_ms": 0.0 if rng.random() < 0.4 else float(rng.uniform(0.0, 5.0))})
    return links


def _random_settings(rng: np.random.Generator, layers: Sequence[Mapping[str, Any]],
                     devices: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    runs = sorted({b for d in devices for b in d["bit_widths"]})
    widths = sorted(set(int(b) for b in rng.choice(runs, size=int(rng.integers(1, len(runs) + 1)), replace=False)))
    prompt, generated = int(rng.integers(1, 65)), int(rng.integers(1, 33))
    settings: dict[str, Any] = {
        "objective": str(rng.choice(["ttft", "token_latency", "throughput"])), "topology": str(rng.choice(["chain", "ring"])),
        "prompt_tokens": prompt, "generated_tokens": generated,
        "context_limit": prompt + generated + int(rng.integers(0, 64)), "streams": int(rng.choice([1, 1, 2, 8])),
        "bit_widths": widths, "kv_bits": int(rng.choice([8, 16]))}
    usable = [d["name"] for d in devices if set(d["bit_widths"]) & set(widths)]

    def spare(name: str) -> bool:  # the others still run every chosen width
        return all(any(b in d["bit_widths"] for d in devices if d["name"] != name) for b in widths)

    spares = [u for u in usable if spare(u)]
    if len(usable) > 1 and spares and rng.random() < 0.2:
        settings["exclude"] = [str(rng.choice(spares))]
        usable = [u for u in usable if u not in settings["exclude"]]
    if rng.random() < 0.25:
        first = int(rng.integers(0, len(layers)))
        last = int(rng.integers(first, min(len(layers), first + 2)))
        settings["pins"] = {str(rng.choice(usable)): [layers[first]["name"], layers[last]["name"]]}
    if any(b < 16 for b in widths) and rng.random() < 0.4:
        settings["error_budget"] = float(rng.uniform(0.0, 0.02)) * len(layers)
    return settings


def random_data(seed: int, devices: int | None = None) -> dict[str, Any]:
    """A random valid ``llm`` instance small enough for brute force: 1-4 blocks (3-6
    parts), 2-3 devices with 1-3 bit-widths each, links that are sometimes missing, a
    chain or a ring, memory that sometimes binds, sometimes pins, an excluded device or an
    error budget."""
    rng = np.random.default_rng([seed, 4242])
    config = _random_config(rng)
    _, layers, _ = decoder_layers(config)
    need = 2.0 * sum(layer["weights"] for layer in layers) + 2.0 * config["hidden"] * 4 * config["layers"] * 200
    devs = _random_devices(rng, devices or int(rng.integers(2, 4)), need)
    data = decoder_instance_data(f"random-llm-s{seed}", config, devs, _random_links(rng, devs),
                                 source={"generator": "splitopt.families.llm.examples.random_data", "seed": int(seed)},
                                 **_random_settings(rng, layers, devs))
    for layer in data["graph"]["layers"]:
        layer["weight_error"] = {"4": float(rng.uniform(0.005, 0.02)), "8": float(rng.uniform(0.0, 0.004))}
    data["settings"]["model"]["max_context"] = max(data["settings"]["model"]["max_context"],
                                                   data["settings"]["context_limit"])
    return data
