"""The options of the commands that rebuild and run a model cut by a plan (``run``,
``export``, ``run-tcp``): the model's seed and, for user models, the synthetic input's
shape, dtype and id range; and their checks, made before torch is imported."""

from __future__ import annotations

from typing import Any, Optional

import typer

#: the largest ``--input-high`` (exclusive bound of random token ids)
MAX_INPUT_HIGH = 2 ** 62


def seed_option() -> Any:
    return typer.Option(0, "--seed", help="Seed of the model's random initialisation (the instances use 0).")


def input_shape_option() -> Any:
    return typer.Option(None, "--input-shape", help="User models: input shape with batch 1, e.g. 1,3,32,32 (default: the factory's example input, else the instance's input).")


def input_dtype_option() -> Any:
    return typer.Option(None, "--input-dtype", help="User models: input dtype, float32 (default) or int64 for token ids (also float64, float16, bfloat16, int32).")


def input_high_option() -> Any:
    return typer.Option(None, "--input-high", help="User models with integer inputs: exclusive upper bound of the random ids (default: the factory's example input max + 1).")


def check_model_options(seed: int, input_high: Optional[int], input_shape: Optional[str] = None,
                        input_dtype: Optional[str] = None) -> None:
    """One line naming the option (InvalidOption, InvalidModel) for a seed or id bound out
    of range, or an input shape or dtype that does not parse."""
    from splitopt.cli.common import check_positive_count, check_seed
    from splitopt.core.input_text import dtype_name, parse_shape

    check_seed(seed)
    if input_high is not None:
        check_positive_count(input_high, "--input-high", high=MAX_INPUT_HIGH)
    if input_shape is not None:
        parse_shape(input_shape)
    if input_dtype is not None:
        dtype_name(input_dtype)
