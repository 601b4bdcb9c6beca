"""The options of the commands that rebuild and run a model cut by a plan (``run``,
``export``, the ``run-tcp`` alias): the model's seed and, for user models, the synthetic
input's shape, dtype and id range; and their checks, made before torch is imported."""

from __future__ import annotations

from typing import Any, Optional

import typer


def seed_option() -> Any:
    return typer.Option(0, "--seed", help="Seed of the model's random initialisation (the instances use 0).")


def input_shape_option(panel: Optional[str] = None) -> Any:
    return typer.Option(None, "--input-shape", rich_help_panel=panel, help="User models: input shape with batch 1, e.g. 1,3,32,32 (default: the factory's example input, else the instance's input).")


def input_dtype_option(panel: Optional[str] = None) -> Any:
    return typer.Option(None, "--input-dtype", rich_help_panel=panel, help="User models: input dtype, float32 (default) or int64 for token ids (also float64, float16, bfloat16, int32).")


def input_high_option(panel: Optional[str] = None) -> Any:
    return typer.Option(None, "--input-high", rich_help_panel=panel, help="User models with integer inputs: exclusive upper bound of the random ids (default: the factory's example input max + 1).")


def check_model_options(seed: int, input_high: Optional[int], input_shape: Optional[str] = None,
                        input_dtype: Optional[str] = None) -> None:
    """One line naming the option for a seed or id bound out of range, or an input shape or
    dtype that does not parse (:func:`splitopt.core.input_text.check_input_options`)."""
    from splitopt.core.input_text import check_input_options

    check_input_options(seed, input_high, input_shape, input_dtype)
