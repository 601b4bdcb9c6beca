"""The text forms of a model input's shape and dtype (``--input-shape 1,3,32,32``,
``--input-dtype int64``), parsed without torch, so that the commands check them before
importing it (seconds); ``splitopt.torch.user_model`` maps the dtype names to torch's."""

from __future__ import annotations

import re

from splitopt.core.errors import InvalidModel

#: the input dtypes synthetic inputs can be drawn in (torch's names without ``torch.``)
INPUT_DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int64", "int32")


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1,3,32,32"`` (also ``1x3x32x32``, ``(1, 3, 32, 32)``) -> ``(1, 3, 32, 32)``;
    the leading batch dimension must be 1. InvalidModel otherwise."""
    body = text.strip().strip("()[]").replace("x", ",").replace("X", ",")
    items = [s.strip() for s in body.split(",")]
    if items and items[-1] == "" and len(items) > 1:
        items = items[:-1]  # "(1, 3,)"
    if not items or not all(re.fullmatch(r"\d+", s) for s in items) or any(int(s) < 1 for s in items):
        raise InvalidModel(f"--input-shape: '{text}' is not a comma-separated list of positive integers "
                           f"such as 1,3,32,32")
    shape = tuple(int(s) for s in items)
    if shape[0] != 1:
        raise InvalidModel(f"--input-shape: '{text}' must start with the batch size 1 (as in 1,3,32,32), "
                           f"got {shape[0]}")
    return shape


def dtype_name(text: str) -> str:
    """The dtype ``text`` names (case and a ``torch.`` prefix ignored), one of
    :data:`INPUT_DTYPE_NAMES`; InvalidModel otherwise."""
    name = text.strip().lower().removeprefix("torch.")
    if name not in INPUT_DTYPE_NAMES:
        raise InvalidModel(f"--input-dtype: unknown dtype '{text}' (choose from {', '.join(INPUT_DTYPE_NAMES)})")
    return name


#: the largest ``--input-high`` (exclusive bound of random token ids)
MAX_INPUT_HIGH = 2 ** 62


def check_input_options(seed: int, input_high: int | None, input_shape: str | None = None,
                        input_dtype: str | None = None) -> None:
    """The options of a model rebuilt by name (``--seed``) and of a user model's synthetic
    inputs (``--input-high``, ``--input-shape``, ``--input-dtype``), checked without torch:
    one line naming the option (InvalidOption, InvalidModel) for a seed or id bound out of
    range, or a shape or dtype that does not parse."""
    from splitopt.core.options import check_count, check_seed

    check_seed(seed)
    if input_high is not None:
        check_count(input_high, "--input-high", high=MAX_INPUT_HIGH)
    if input_shape is not None:
        parse_shape(input_shape)
    if input_dtype is not None:
        dtype_name(input_dtype)
