"""Write the chain instances (problem ``chain``): ``instances/jmsnas_chain_*.json`` and
``instances/transformer1000_chain8*.json``.

JMSNAS chain (Sec. III-A, Fig. 2(a), Table I): UE -> SBS -> MBS -> cloud with links of
25, 50 and 200 Mbps (no fixed latency), devices as in ``make_mesh_instances.py`` (the
same assumed effective rates: Raspberry Pi 4 4e9 MAC/s, laptop GPU 2.5e11, Jetson AGX
Xavier 1.25e11, V100 server 4e11; compute-only latency, MACs / rate). The layer graphs
are those of ``mobilenetv2_eyeriss.json`` and ``resnet50_eyeriss.json`` (torch.export
captures, BN folded, activations fused); input 3x224x224 at 8 bits, activations at 16.

``transformer1000_chain8``: a synthetic transformer-style graph of 1,000 layers (an
embedding and 111 pre-norm blocks of nine layers: ln1, qkv, attention, projection,
residual add, ln2, fc1 (GELU fused), fc2, residual add; sequence 128, width 768, MLP
3072, so about 7.1 M weights and 0.93 GMAC per block) over an 8-device chain whose
compute rates rise and whose memories (0.5 to 1 GB each) force the 1.57 GB of 16-bit
weights onto at least two devices; links from 200 Mbps to 10 Gbps with 0.5-5 ms fixed
latency. Two objectives: ``latency`` (single sample, JMSNAS Eq. 1) and ``throughput``
(the bottleneck stage of a pipelined stream).

Run: ``python instances/make_chain_instances.py`` (deterministic, a few seconds).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_mesh_instances as mesh  # noqa: E402  (the shared JMSNAS device assumptions)

FORMAT = "splitopt-instance/1"
SCRIPT = "instances/make_chain_instances.py"
JMSNAS_CHAIN = ["UE", "SBS", "MBS1", "cloud"]


def jmsnas_chain(model_file: str, name: str, objective: str) -> dict:
    base = json.loads((HERE / model_file).read_text())
    devices = [d for d in mesh.topology()["devices"] if d["name"] in JMSNAS_CHAIN]
    devices.sort(key=lambda d: JMSNAS_CHAIN.index(d["name"]))
    devices[2] = dict(devices[2], name="MBS", description=devices[2]["description"])
    chain = ["UE", "SBS", "MBS", "cloud"]
    links = [{"source": a, "target": b, "bandwidth_bits_per_s": bw, "latency_ms": 0.0}
             for (a, b), bw in zip(zip(chain, chain[1:]), (25e6, 50e6, 200e6))]
    layers = []
    for layer in base["graph"]["layers"]:
        layer = {k: v for k, v in layer.items() if k not in ("weight_error", "activation_error", "latency_ms")}
        layers.append(layer)
    return {
        "format": FORMAT,
        "name": name,
        "description": f"JMSNAS chain UE -> SBS -> MBS -> cloud (Table I links) with the {base['name']} layer graph; "
                       f"objective {objective}",
        "source": {"script": SCRIPT, "paper": "JMSNAS (Tian et al.), Sec. III-A Eq. 1, Fig. 2(a), Table I, Sec. V-A",
                   "model": f"layer graph of instances/{model_file}",
                   "note": "device rates and memories are assumptions stated in instances/make_mesh_instances.py"},
        "graph": {"inputs": base["graph"]["inputs"], "layers": layers},
        "devices": devices,
        "links": links,
        "settings": {"problem": "chain", "objective": objective, "chain": chain, "cloud_bits": 16},
    }


def transformer_layers(blocks: int, seq: int = 128, width: int = 768, mlp: int = 3072) -> tuple[list, list]:
    """The embedding and ``blocks`` pre-norm blocks (nine layers each), in execution order."""
    inputs = [{"name": "tokens", "shape": [seq], "bits": 32}]
    vocab = 32000
    layers = [{"name": "embed", "op": "embedding", "inputs": ["tokens"], "macs": 0.0,
               "weights": float(vocab * width + seq * width), "output_shape": [seq, width]}]
    h = "embed"

    def add(name, op, ins, macs, weights, shape):
        layers.append({"name": name, "op": op, "inputs": ins, "macs": float(macs), "weights": float(weights),
                       "output_shape": shape})

    for b in range(blocks):
        p = f"b{b}."
        add(p + "ln1", "layer_norm", [h], seq * width * 2, 2 * width, [seq, width])
        add(p + "qkv", "linear", [p + "ln1"], seq * width * 3 * width, 3 * width * width + 3 * width, [seq, 3 * width])
        add(p + "attn", "attention", [p + "qkv"], 2 * seq * seq * width, 0, [seq, width])
        add(p + "proj", "linear", [p + "attn"], seq * width * width, width * width + width, [seq, width])
        add(p + "add1", "add", [p + "proj", h], seq * width, 0, [seq, width])
        add(p + "ln2", "layer_norm", [p + "add1"], seq * width * 2, 2 * width, [seq, width])
        add(p + "fc1", "linear", [p + "ln2"], seq * width * mlp, width * mlp + mlp, [seq, mlp])
        add(p + "fc2", "linear", [p + "fc1"], seq * mlp * width, mlp * width + width, [seq, width])
        add(p + "add2", "add", [p + "fc2", p + "add1"], seq * width, 0, [seq, width])
        h = p + "add2"
    return inputs, layers


#: name, MAC/s, memory bytes; the 8 devices of the long chain
CHAIN8 = [
    ("phone", 2e10, 0.5e9), ("gateway", 5e10, 0.5e9), ("small_cell", 1e11, 0.75e9), ("macro_cell", 1e11, 0.75e9),
    ("metro_edge", 2e11, 0.75e9), ("regional_edge", 2e11, 1.0e9), ("dc_edge", 5e11, 1.0e9), ("cloud", 1e12, 1.0e9),
]
#: bits/s and fixed ms of the 7 links
LINKS8 = [(2e8, 5.0), (1e9, 2.0), (1e9, 2.0), (1e10, 1.0), (1e10, 1.0), (1e9, 2.0), (1e10, 0.5)]


def transformer_chain(objective: str) -> dict:
    inputs, layers = transformer_layers(111)
    assert len(layers) == 1000
    devices = [{"name": n, "description": "assumed", "mac_per_s": rate, "offchip_bytes_per_s": None,
                "onchip_bytes": 0, "memory_bytes": mem, "bit_widths": [8, 16]} for n, rate, mem in CHAIN8]
    names = [d["name"] for d in devices]
    links = [{"source": a, "target": b, "bandwidth_bits_per_s": bw, "latency_ms": lat}
             for (a, b), (bw, lat) in zip(zip(names, names[1:]), LINKS8)]
    suffix = "" if objective == "latency" else "_throughput"
    return {
        "format": FORMAT,
        "name": f"transformer1000_chain8{suffix}",
        "description": "synthetic 1,000-layer transformer-style graph over an 8-device chain; objective " + objective,
        "source": {"script": SCRIPT, "note": "synthetic; rates, memories and links are assumptions"},
        "graph": {"inputs": inputs, "layers": layers},
        "devices": devices,
        "links": links,
        "settings": {"problem": "chain", "objective": objective, "chain": names, "cloud_bits": 16},
    }


def main() -> None:
    out = {
        "jmsnas_chain_mobilenetv2.json": jmsnas_chain("mobilenetv2_eyeriss.json", "jmsnas_chain_mobilenetv2", "latency"),
        "jmsnas_chain_mobilenetv2_throughput.json": jmsnas_chain(
            "mobilenetv2_eyeriss.json", "jmsnas_chain_mobilenetv2_throughput", "throughput"),
        "jmsnas_chain_resnet50.json": jmsnas_chain("resnet50_eyeriss.json", "jmsnas_chain_resnet50", "latency"),
        "transformer1000_chain8.json": transformer_chain("latency"),
        "transformer1000_chain8_throughput.json": transformer_chain("throughput"),
    }
    for name, data in out.items():
        (HERE / name).write_text(json.dumps(data, indent=1) + "\n")
        print("wrote", name)


if __name__ == "__main__":
    main()
