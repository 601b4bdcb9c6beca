"""A ``torch.export`` program saved as ``MODEL.pt2`` (``torch.export.save``), read back for
``splitopt profile MODEL.pt2``: the program, its example input, seeded calibration inputs
and the guard that reports a failure as one line."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import torch

from splitopt.core.errors import InvalidModel, SplitoptError
from splitopt.core.input_text import parse_shape
from splitopt.torch.capture import load_exported
from splitopt.torch.seeds import CALIBRATION_SEED, RUN_INPUT_SEED
from splitopt.torch.user_model import one_line, parse_dtype, quiet_torch, synthetic_inputs


def saved_program(path: Path, model: str, input_shape: Optional[str], input_dtype: Optional[str],
                  input_high: Optional[int]):
    """``(program, example input, calibration inputs(n), error guard)`` of a
    ``torch.export.save`` file: the example is the saved example input unless
    ``--input-shape``/``--input-dtype`` ask for another; calibration inputs are seeded
    synthetic ones of that shape and dtype (those of user models). ``path``: the file
    (:func:`splitopt.torch.profile_model.model_file`), ``model`` as the user named it."""
    try:
        with quiet_torch():
            program, saved = load_exported(str(path))
    except ValueError as e:
        raise InvalidModel(str(e)) from e
    dtype = parse_dtype(input_dtype) if input_dtype is not None else (saved.dtype if saved is not None else torch.float32)
    if input_shape is not None:
        shape = parse_shape(input_shape)
    elif saved is not None:
        shape = (1, *saved.shape[1:])
    else:
        raise InvalidModel(f"--input-shape: needed for '{model}' (the saved program has a dynamic input shape "
                           f"and no example input); give e.g. --input-shape 1,3,224,224")
    high = input_high
    if not dtype.is_floating_point and high is None:
        if saved is not None and not saved.dtype.is_floating_point and saved.numel():
            high = int(saved.max()) + 1
        else:
            raise InvalidModel("--input-high: needed for a program with integer inputs (the exclusive upper bound "
                               "of the random ids)")
    per_sample = tuple(shape[1:])
    if saved is not None and tuple(saved.shape) == tuple(shape) and saved.dtype == dtype:
        example = saved
    else:
        example = synthetic_inputs(1, per_sample, dtype, high, RUN_INPUT_SEED)

    def calibration(n: int) -> torch.Tensor:
        return synthetic_inputs(n, per_sample, dtype, high, CALIBRATION_SEED)

    @contextlib.contextmanager
    def guard(module, example, what: str):
        try:
            with quiet_torch():
                yield
        except SplitoptError:
            raise
        except Exception as e:  # noqa: BLE001 - reported as bad input, one line
            raise InvalidModel(f"{what} failed: {one_line(e)}") from e

    return program, example, calibration, guard
