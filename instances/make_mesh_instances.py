"""Write the mesh instances (JMSNAS Fig. 2(b)): ``instances/jmsnas_mesh_*.json``.

Topology (JMSNAS Sec. III-B, Fig. 2(b)): the UE sends to the SBS (the root), the SBS
broadcasts to three MBSs over separate links, each MBS sends to the cloud, which
aggregates. Link capacities from JMSNAS Table I: UE->SBS 25 Mbps (wireless),
SBS->MBS 50 Mbps (wireless), MBS->cloud 200 Mbps (wired); no fixed latency per transfer.

Devices, profiled in JMSNAS Sec. V-A; the effective compute rates are our assumptions
(order of magnitude of batch-1 CNN inference at 16-bit, launch overheads included, not
peak rates), with ``offchip_bytes_per_s = null`` so that a layer takes MACs / rate:

| device | stands for | MAC/s (assumed) | memory for the model (assumed) |
|---|---|---|---|
| UE | Raspberry Pi 4, 4x Cortex-A72 1.5 GHz | 4e9 | 2 GB |
| SBS | XPS15 laptop, i7-11800H + RTX 3050 | 2.5e11 | 4 GB (the GPU's) |
| MBS1..3 | Jetson AGX Xavier | 1.25e11 | 16 GB |
| cloud | 2x Xeon 8280 + Tesla V100 | 4e11 (batch 1 is launch-bound) | 16 GB |

Instances:

* ``jmsnas_mesh_googlenet``: the GoogLeNet layer graph of ``googlenet_eyeriss.json``
  (81 fused layers, inception blocks with four parallel branches), input 3x224x224 at
  8 bits, activations at 16 bits;
* ``jmsnas_mesh_threebranch``: a JMSNAS-style three-branch network (Fig. 3(c), Eq. 2): a
  stem of four 3x3 convs that reduces 3x224x224 to 32x14x14, three parallel branches of
  four 3x3 convs (32->512->512->512->32 channels at 14x14, about 0.98 GMAC and 10 MB of
  16-bit weights each, like ResNet stage-4 blocks), and a head (concat, 1x1 conv, global
  pool, classifier). The branches are heavy enough that running them on devices that
  work at the same time pays;
* ``jmsnas_mesh_threebranch_tight``: the same with the SBS, MBS and cloud memories cut
  to 12 MB each, so that none of them holds two branches (memory binds and the
  branches spread over the mesh).

Run: ``python instances/make_mesh_instances.py`` (deterministic).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
FORMAT = "splitopt-instance/1"

DEVICES = [
    ("UE", "Raspberry Pi 4 (4x Cortex-A72 1.5 GHz); effective rate assumed", 4e9, 2e9),
    ("SBS", "XPS15 laptop, i7-11800H + RTX 3050; effective rate assumed", 2.5e11, 4e9),
    ("MBS1", "NVIDIA Jetson AGX Xavier (MEC server); effective rate assumed", 1.25e11, 16e9),
    ("MBS2", "NVIDIA Jetson AGX Xavier (MEC server); effective rate assumed", 1.25e11, 16e9),
    ("MBS3", "NVIDIA Jetson AGX Xavier (MEC server); effective rate assumed", 1.25e11, 16e9),
    ("cloud", "2x Xeon Platinum 8280 + Tesla V100; effective batch-1 rate assumed", 4e11, 16e9),
]
MBS = ("MBS1", "MBS2", "MBS3")
#: JMSNAS Table I, bits/s
LINKS = [("UE", "SBS", 25e6)] + [("SBS", m, 50e6) for m in MBS] + [(m, "cloud", 200e6) for m in MBS]


def topology(memory: dict[str, float] | None = None) -> dict:
    memory = memory or {}
    devices = [
        {"name": n, "description": desc, "mac_per_s": rate, "offchip_bytes_per_s": None, "onchip_bytes": 0,
         "memory_bytes": memory.get(n, mem), "bit_widths": [8, 16]}
        for n, desc, rate, mem in DEVICES
    ]
    links = [{"source": u, "target": v, "bandwidth_bits_per_s": bw, "latency_ms": 0.0} for u, v, bw in LINKS]
    return {"devices": devices, "links": links}


def settings() -> dict:
    return {"problem": "mesh", "edge": "UE", "cloud": "cloud", "cloud_bits": 16, "transmit_bits": None,
            "mesh": {"routing": "shortest", "deliver_outputs": True}}


SOURCE = {"paper": "JMSNAS (Tian et al.), Sec. III-B Eq. 2, Fig. 2(b), Table I, Sec. V-A",
          "note": "device rates and memories are assumptions stated in instances/make_mesh_instances.py"}


def googlenet() -> dict:
    base = json.loads((HERE / "googlenet_eyeriss.json").read_text())
    layers = []
    for layer in base["graph"]["layers"]:
        layers.append({k: layer[k] for k in ("name", "op", "inputs", "macs", "weights", "output_shape")})
    return {
        "format": FORMAT,
        "name": "jmsnas_mesh_googlenet",
        "description": "GoogLeNet (81 fused layers, from googlenet_eyeriss.json) on the JMSNAS Fig. 2(b) mesh: "
                       "UE -> SBS -> 3 MBS -> cloud, Table I links",
        "source": dict(SOURCE, model="GoogLeNet layer graph of instances/googlenet_eyeriss.json"),
        "graph": {"inputs": base["graph"]["inputs"], "layers": layers},
        **topology(),
        "settings": settings(),
    }


def _conv(name: str, inputs: list[str], cin: int, cout: int, k: int, hw: int, op: str = "conv") -> dict:
    """A k x k convolution with ``cout`` outputs at ``hw x hw`` (stride already applied)."""
    return {"name": name, "op": op, "inputs": inputs, "macs": float(hw * hw * cout * cin * k * k),
            "weights": float(cout * cin * k * k + cout), "output_shape": [cout, hw, hw]}


def threebranch(name: str, memory: dict[str, float] | None = None, description: str = "") -> dict:
    layers = [
        _conv("stem.conv1", ["input"], 3, 32, 3, 112),
        _conv("stem.conv2", ["stem.conv1"], 32, 64, 3, 56),
        _conv("stem.conv3", ["stem.conv2"], 64, 64, 3, 28),
        _conv("stem.conv4", ["stem.conv3"], 64, 32, 3, 14),
    ]
    heads = []
    for b in (1, 2, 3):
        widths = [32, 512, 512, 512, 32]
        prev = "stem.conv4"
        for k in range(4):
            layer = _conv(f"branch{b}.conv{k + 1}", [prev], widths[k], widths[k + 1], 3, 14)
            layers.append(layer)
            prev = layer["name"]
        heads.append(prev)
    layers.append({"name": "head.concat", "op": "concat", "inputs": heads, "macs": 0.0, "weights": 0.0,
                   "output_shape": [96, 14, 14]})
    layers.append(_conv("head.conv", ["head.concat"], 96, 256, 1, 14))
    layers.append({"name": "head.pool", "op": "pool", "inputs": ["head.conv"], "macs": float(256 * 14 * 14),
                   "weights": 0.0, "output_shape": [256]})
    layers.append({"name": "head.fc", "op": "linear", "inputs": ["head.pool"], "macs": float(256 * 1000),
                   "weights": float(256 * 1000 + 1000), "output_shape": [1000]})
    return {
        "format": FORMAT,
        "name": name,
        "description": description or "JMSNAS-style three-branch network (stem, 3 parallel branches, head) on the "
                                      "Fig. 2(b) mesh with Table I links",
        "source": dict(SOURCE, model="synthetic three-branch CNN, conv MACs = H*W*Cout*Cin*k*k"),
        "graph": {"inputs": [{"name": "input", "shape": [3, 224, 224], "bits": 8}], "layers": layers},
        **topology(memory),
        "settings": settings(),
    }


def main() -> None:
    from splitopt.api import parse_instance

    out = {
        "jmsnas_mesh_googlenet": googlenet(),
        "jmsnas_mesh_threebranch": threebranch("jmsnas_mesh_threebranch"),
        "jmsnas_mesh_threebranch_tight": threebranch(
            "jmsnas_mesh_threebranch_tight", memory={"SBS": 12e6, "MBS1": 12e6, "MBS2": 12e6, "MBS3": 12e6, "cloud": 12e6},
            description="three-branch network on the Fig. 2(b) mesh with SBS, MBS and cloud memory cut to 12 MB each"),
    }
    for name, data in out.items():
        parse_instance(data)  # validate before writing
        path = HERE / f"{name}.json"
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
