"""Write the language-model instances (problem ``llm``): public decoder configs over device
presets, with no download.

Each model's numbers are copied below from its Hugging Face ``config.json`` (the repository
named in ``source``): hidden size, decoder blocks, attention and key/value heads, head
dimension, MLP intermediate size, vocabulary, whether the head is tied to the embedding,
the longest context, and for the mixture of experts its experts and the experts each token
uses. ``splitopt.families.llm.examples.decoder_layers`` turns a config into the parts
(embedding, ``block_0`` .. ``block_{N-1}``, head) with their weights and MACs per token
(one MAC per weight of every linear map a token passes through; attention over the
context is the family's own term). Parameter counts this gives: GPT-2 124.4 M, Llama-3.2-1B
1.50 B (1.24 B with the tied head held once), Llama-3.2-3B 3.61 B (3.21 B tied), Llama-3.1-8B
8.03 B, Llama-3.1-70B 70.55 B, Qwen2.5-7B 7.62 B, Mixtral-8x7B 46.70 B (12.88 B read per
token).

Devices are ``splitopt.core.presets`` (vendor peak figures, assumptions); links are
assumptions stated in ``LINKS``. Where an instance offers 4- and 8-bit weights with an error
budget, the per-part errors are an assumption too (``assumed_error``): no model is
measured here. Run: ``python instances/make_llm_instances.py [--out instances/]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from splitopt.api import parse_instance  # noqa: E402
from splitopt.core import presets  # noqa: E402
from splitopt.core.instance_io import instance_json  # noqa: E402
from splitopt.families.llm.examples import decoder_instance_data  # noqa: E402

#: model configs (config.json of the named repository)
CONFIGS: dict[str, dict[str, Any]] = {
    "gpt2": {"source": "openai-community/gpt2", "hidden": 768, "layers": 12, "heads": 12, "kv_heads": 12,
             "head_dim": 64, "intermediate": 3072, "vocab": 50257, "tied": True, "max_context": 1024,
             "mlp": "plain", "bias": True, "positions": 1024},
    "llama32_1b": {"source": "meta-llama/Llama-3.2-1B", "hidden": 2048, "layers": 16, "heads": 32, "kv_heads": 8,
                   "head_dim": 64, "intermediate": 8192, "vocab": 128256, "tied": True, "max_context": 131072},
    "llama32_3b": {"source": "meta-llama/Llama-3.2-3B", "hidden": 3072, "layers": 28, "heads": 24, "kv_heads": 8,
                   "head_dim": 128, "intermediate": 8192, "vocab": 128256, "tied": True, "max_context": 131072},
    "llama31_8b": {"source": "meta-llama/Llama-3.1-8B", "hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 8,
                   "head_dim": 128, "intermediate": 14336, "vocab": 128256, "tied": False, "max_context": 131072},
    "llama31_70b": {"source": "meta-llama/Llama-3.1-70B", "hidden": 8192, "layers": 80, "heads": 64, "kv_heads": 8,
                    "head_dim": 128, "intermediate": 28672, "vocab": 128256, "tied": False, "max_context": 131072},
    "qwen25_7b": {"source": "Qwen/Qwen2.5-7B", "hidden": 3584, "layers": 28, "heads": 28, "kv_heads": 4,
                  "head_dim": 128, "intermediate": 18944, "vocab": 152064, "tied": False, "max_context": 131072,
                  "qkv_bias": True},
    "mixtral_8x7b": {"source": "mistralai/Mixtral-8x7B-v0.1", "hidden": 4096, "layers": 32, "heads": 32,
                     "kv_heads": 8, "head_dim": 128, "intermediate": 14336, "vocab": 32000, "tied": False,
                     "max_context": 32768, "experts": 8, "active_experts": 2},
}

#: links (assumptions): (bandwidth bits/s, fixed latency ms)
LINKS = {
    "ethernet": (1e9, 0.2),       # gigabit Ethernet through a switch
    "wifi": (2e8, 3.0),           # Wi-Fi 5/6 in a home, effective
    "thunderbolt": (2e10, 0.05),  # Thunderbolt 4 between two Macs, effective (40 Gbit/s nominal)
}


def assumed_error(bits: int) -> float:
    """An assumed relative weight MSE per part: the uniform quantizer's noise law, ``2.56 x
    4^-bits`` (1 % at 4 bits, 0.004 % at 8); zero at 16. Measure a real model for real
    numbers."""
    return 0.0 if bits >= 16 else 2.56 * 4.0 ** -bits


def mesh(devices: list[dict[str, Any]], kind: str, fast: dict[frozenset, str] | None = None) -> list[dict[str, Any]]:
    """A link both ways between every pair of devices, of ``kind`` (``fast``: pairs with
    another kind)."""
    out = []
    for a in devices:
        for b in devices:
            if a is not b:
                rate, latency = LINKS[(fast or {}).get(frozenset((a["name"], b["name"])), kind)]
                out.append(presets.link(a["name"], b["name"], rate, latency))
    return out


#: instance name -> (model, device presets, link kind, settings, description)
INSTANCES: dict[str, tuple[str, list[str], str, dict[str, Any], str]] = {
    "llm_gpt2_pi5_macbook": ("gpt2", ["pi5", "macbook_m1max"], "wifi",
                             {"objective": "token_latency", "prompt_tokens": 256, "generated_tokens": 256},
                             "GPT-2 over a Raspberry Pi 5 and a MacBook (Wi-Fi)"),
    "llm_llama32_1b_pi5_orin": ("llama32_1b", ["pi5", "orin"], "ethernet",
                                {"objective": "token_latency", "prompt_tokens": 512, "generated_tokens": 256,
                                 "context_limit": 4096},
                                "Llama-3.2-1B over a Raspberry Pi 5 and a Jetson AGX Orin (Ethernet)"),
    "llm_llama31_8b_3dev": ("llama31_8b", ["pi5", "macbook_m1max", "rtx4090"], "ethernet",
                            {"objective": "token_latency", "prompt_tokens": 1024, "generated_tokens": 256,
                             "context_limit": 8192, "streams": 1},
                            "Llama-3.1-8B over a Raspberry Pi 5, a MacBook and an RTX 4090 desktop (Ethernet)"),
    "llm_qwen25_7b_ring3": ("qwen25_7b", ["macbook_m1max", "pi5", "orin"], "ethernet",
                            {"objective": "throughput", "topology": "ring", "prompt_tokens": 512,
                             "generated_tokens": 512, "context_limit": 4096, "streams": 4, "kv_bits": 8},
                            "Qwen2.5-7B in a ring of a MacBook, a Raspberry Pi 5 and a Jetson AGX Orin, 4 streams"),
    "llm_mixtral_8x7b_4dev": ("mixtral_8x7b", ["rtx4090", "macbook_m1max", "orin", "pi5"], "ethernet",
                              {"objective": "ttft", "prompt_tokens": 2048, "generated_tokens": 256,
                               "context_limit": 16384},
                              "Mixtral-8x7B over an RTX 4090 desktop, a MacBook, a Jetson AGX Orin and a Raspberry "
                              "Pi 5 (Ethernet)"),
    "llm_llama31_70b_6dev": ("llama31_70b", ["macbook_m1max", "macbook_m1max", "rtx4090", "orin", "pi5", "pi5"],
                             "ethernet",
                             {"objective": "throughput", "topology": "ring", "prompt_tokens": 1024,
                              "generated_tokens": 512, "context_limit": 8192, "streams": 4, "bit_widths": [4, 8, 16],
                              "error_budget_share": 0.4},
                             "Llama-3.1-70B in a ring of two MacBooks (Thunderbolt between them), an RTX 4090 "
                             "desktop, a Jetson AGX Orin and two Raspberry Pi 5 (Ethernet), 4 streams, 4/8/16-bit "
                             "weights under an assumed error budget"),
}


def build(name: str) -> dict[str, Any]:
    """The JSON data of instance ``name``."""
    model, kinds, link_kind, settings, description = INSTANCES[name]
    config = {k: v for k, v in CONFIGS[model].items() if k != "source"}
    if config.pop("qkv_bias", False):
        config["bias"] = False  # Qwen's q/k/v biases: 3584 + 2 x 512 elements per block, below 0.001 %
    devices = presets.preset_devices(kinds)
    macs = [d["name"] for d in devices if d["name"].startswith("macbook")]
    fast = {frozenset(macs): "thunderbolt"} if len(macs) == 2 else None
    settings = dict(settings)
    share = settings.pop("error_budget_share", None)
    data = decoder_instance_data(
        name, config, devices, mesh(devices, link_kind, fast), description=description,
        source={"script": "instances/make_llm_instances.py", "model": CONFIGS[model]["source"],
                "config": CONFIGS[model], "devices": kinds, "links": link_kind,
                "assumptions": "device rates are vendor peak figures; links: LINKS in the script"
                               + ("; weight_error: assumed_error in the script" if share else "")},
        **settings)
    if share is not None:
        widths = settings["bit_widths"]
        for layer in data["graph"]["layers"]:
            layer["weight_error"] = {str(b): assumed_error(b) for b in widths if b < 16}
        data["settings"]["error_budget"] = share * assumed_error(min(widths)) * len(data["graph"]["layers"])
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    for name in INSTANCES:
        data = build(name)
        inst = parse_instance(json.loads(json.dumps(data)))  # every check a file gets
        path = args.out / f"{name}.json"
        path.write_text(instance_json(inst))
        weights = sum(layer.weights for layer in inst.layers)
        print(f"wrote {path.name}: {len(inst.layers)} parts, {weights / 1e9:.2f} B weights, {len(inst.devices)} devices")


if __name__ == "__main__":
    main()
