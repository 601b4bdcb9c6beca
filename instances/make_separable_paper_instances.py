"""Write the separable instances built from the Separable NN paper's architecture
(Sep-ResNeXt on CIFAR, Table 1) on Raspberry Pi 3B+-class devices (Sec. 4.6):

* ``separable_resnext56_pi4.json``: G = 4, alpha = 2 (9 steps), Table 4's nine sparsity
  levels, float32/float16, the paper's Table 6 policies as reference plans, and the
  mixing limit (every device's features reach every other device);
* ``separable_resnext56_pi4_equal_maps.json``: the same with every block's feature map
  the size of the first stage's: the accounting under which Table 5's percentages are
  reproduced (formulations/separable_policies.md);
* ``separable_resnext110_pi8.json``: G = 8 devices, 36 blocks, alpha = 1 (36 steps).

Run from the repository root: ``python instances/make_separable_paper_instances.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from splitopt.families.separable.examples import resnext_cifar_data

HERE = Path(__file__).resolve().parent


def main() -> None:
    specs = {
        "separable_resnext56_pi4": dict(),
        "separable_resnext56_pi4_equal_maps": dict(equal_maps=True),
        "separable_resnext110_pi8": dict(g=8, blocks_per_stage=12, alpha=1, paths=8),
    }
    for name, kwargs in specs.items():
        data = resnext_cifar_data(name=name, **kwargs)
        data["settings"]["separable"]["mixing"] = True
        data["source"]["script"] = "instances/make_separable_paper_instances.py"
        (HERE / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote instances/{name}.json")


if __name__ == "__main__":
    main()
