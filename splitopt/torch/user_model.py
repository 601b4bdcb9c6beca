"""User models for ``splitopt profile`` and ``splitopt run``: any traceable ``nn.Module``
named by a spec ``PATH.py:FACTORY`` (a Python file) or ``package.module:FACTORY`` (an
importable module).

``FACTORY`` is an attribute of that file or module (dots reach nested attributes):

* a callable, called with no arguments, returning an ``nn.Module`` or a tuple
  ``(module, example_input)``;
* or an ``nn.Module`` instance itself.

The file is loaded and the factory called with torch's global RNG seeded (``seed``, the
CLI's ``--seed``) and restored afterwards, so a randomly initialised model is the same in ``profile`` and
``run``. The module is put in eval mode.

Inputs: ``input_shape`` (``"1,3,32,32"``, leading batch dimension 1) and ``input_dtype``
(``float32``, ``int64``, ...) give the example input and the synthetic run and
calibration inputs: floats are standard normal draws, integers (token ids) uniform in
``[0, input_high)``, each from a seeded ``torch.Generator``. Without a shape the
factory's example input gives shape and dtype (and ``input_high``, as its max + 1, for
integers); ``splitopt run`` can also take the shape from the instance.

Every failure is a one-line :class:`~splitopt.core.errors.InvalidModel` (the CLI prints
it and exits with status 2): a missing file, a module that does not import, a missing
attribute, a factory that raises or returns something else than a module, a bad
``--input-shape``, an example input that does not fit the module
(``example input of shape (...) does not fit the module: ...``) and a module that
torch.export cannot capture (``the module cannot be captured by torch.export: ...``,
see :func:`capture_checked` and :func:`capture_errors`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import io
import logging
import re
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from splitopt.core.errors import InvalidModel, SplitoptError
from splitopt.core.input_text import INPUT_DTYPE_NAMES, dtype_name, parse_shape
from splitopt.torch.capture import eval_mode
# the seeds and count of the synthetic run and calibration inputs: those of the built-in models
from splitopt.torch.seeds import CALIBRATION_IMAGES as CALIBRATION_INPUTS
from splitopt.torch.seeds import CALIBRATION_SEED, RUN_INPUT_SEED

DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in INPUT_DTYPE_NAMES}


def is_spec(text: str) -> bool:
    """True if ``text`` names a user model (``PATH.py:FACTORY`` or ``module:FACTORY``)
    rather than a built-in model name."""
    return ":" in text


def one_line(e: BaseException) -> str:
    """``Type: first non-empty line of the message`` (just ``Type`` without a message)."""
    first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


# ----- loading ------------------------------------------------------------------------------

def _split_spec(spec: str) -> tuple[str, str]:
    where, _, attr = spec.rpartition(":")
    if not where or not attr or not all(part.isidentifier() for part in attr.split(".")):
        raise InvalidModel(f"model '{spec}': expected PATH.py:FACTORY or package.module:FACTORY "
                           f"(FACTORY a Python name)")
    return where, attr


def _is_path(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def _load_file(path_text: str) -> Any:
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise InvalidModel(f"model file '{path_text}' not found" if not path.exists()
                           else f"model file '{path_text}' is not a file")
    path = path.resolve()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    name = f"splitopt_user_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InvalidModel(f"model file '{path_text}' cannot be loaded as Python")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses, pickling and torch.export look modules up here
    sys.path.insert(0, str(path.parent))  # sibling imports work as with `python PATH.py`
    try:
        spec.loader.exec_module(mod)
    except KeyboardInterrupt:
        sys.modules.pop(name, None)
        raise
    except BaseException as e:  # noqa: BLE001 - a broken user file (even one calling sys.exit) is bad input
        sys.modules.pop(name, None)
        raise InvalidModel(f"model file '{path_text}' failed to load: {one_line(e)}") from e
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(path.parent))
    return mod


def _import_module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            raise InvalidModel(f"cannot import module '{name}': {e} (give a file as PATH.py:FACTORY, "
                               f"or make the module importable)") from e
        raise InvalidModel(f"importing module '{name}' failed: {one_line(e)}") from e
    except Exception as e:  # noqa: BLE001 - an import that crashes is bad input
        raise InvalidModel(f"importing module '{name}' failed: {one_line(e)}") from e


def _attribute(owner: Any, attr: str, where: str) -> Any:
    obj = owner
    for part in attr.split("."):
        if not hasattr(obj, part):
            here = getattr(owner, "__name__", None)
            names = sorted(n for n, v in vars(owner).items() if not n.startswith("_") and (
                isinstance(v, torch.nn.Module) or (callable(v) and getattr(v, "__module__", None) == here)))
            hint = f" (callables defined there: {', '.join(names)})" if names else ""
            raise InvalidModel(f"'{where}' has no attribute '{attr}'{hint}")
        obj = getattr(obj, part)
    return obj


def load_factory_output(spec: str, seed: int = 0) -> tuple[torch.nn.Module, torch.Tensor | None, str]:
    """``(module in eval mode, example input or None, factory name)`` of a user spec;
    InvalidModel (one line) for anything that goes wrong."""
    where, attr = _split_spec(spec)
    what = f"factory '{attr}' of '{where}'"
    with torch.random.fork_rng(devices=[]):  # seeded: module-level and factory-made weights
        torch.manual_seed(seed)
        owner = _load_file(where) if _is_path(where) else _import_module(where)
        obj = _attribute(owner, attr, where)
        if isinstance(obj, torch.nn.Module):
            out: Any = obj
        elif callable(obj):
            try:
                out = obj()
            except Exception as e:  # noqa: BLE001 - the user's code failing is bad input
                raise InvalidModel(f"{what} raised {one_line(e)}") from e
        else:
            raise InvalidModel(f"'{where}:{attr}' is a {type(obj).__name__}, not a callable or a torch.nn.Module")
    example = None
    if isinstance(out, tuple):
        if len(out) != 2:
            raise InvalidModel(f"{what} returned a tuple of {len(out)} items; expected (module, example_input)")
        out, example = out
        if not isinstance(example, torch.Tensor):
            raise InvalidModel(f"{what} returned (module, {type(example).__name__}); "
                               f"the example input must be a torch.Tensor")
    if not isinstance(out, torch.nn.Module):
        raise InvalidModel(f"{what} returned {type(out).__name__}, not a torch.nn.Module "
                           f"(or a (module, example_input) tuple)")
    return eval_mode(out), example, attr.rsplit(".", 1)[-1]


# ----- inputs -------------------------------------------------------------------------------

def parse_dtype(text: str) -> torch.dtype:
    """The torch dtype ``text`` names (:func:`splitopt.core.input_text.dtype_name`)."""
    return DTYPES[dtype_name(text)]


def synthetic_inputs(n: int, shape: tuple[int, ...], dtype: torch.dtype, high: int | None, seed: int) -> torch.Tensor:
    """``n`` inputs of per-sample ``shape`` (no batch dimension): standard normal floats or
    integers uniform in ``[0, high)``, from a ``torch.Generator`` seeded with ``seed``."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn((n, *shape), generator=g, dtype=torch.float32).to(dtype)
    if high is None:
        raise ValueError(f"synthetic {dtype} inputs need high (the exclusive upper bound of the ids)")
    return torch.randint(0, int(high), (n, *shape), generator=g, dtype=dtype)


def check_forward(module: torch.nn.Module, example: torch.Tensor) -> None:
    """Run ``module`` on ``example``; InvalidModel ``example input of shape (...) does not
    fit the module: ...`` if the forward raises."""
    try:
        with torch.no_grad():
            module(example)
    except Exception as e:  # noqa: BLE001 - any failure of the user's forward
        raise InvalidModel(f"example input of shape {tuple(example.shape)} ({str(example.dtype).removeprefix('torch.')}) "
                           f"does not fit the module: {one_line(e)}") from e


def load_user_model(spec: str, seed: int = 0, *, input_shape: str | None = None, input_dtype: str | None = None,
                    input_high: int | None = None, inst=None, check: bool = True):
    """``(module, None, example input, run inputs(n), calibration inputs())`` of a user
    model, the tuple ``splitopt.torch.models.build_model`` returns (``rename`` None).

    Shape: ``input_shape`` if given, else the factory's example input's, else the input
    of ``inst`` (an instance made by ``profile``). Dtype: ``input_dtype``, else the
    example's, else float32. ``check``: run the module once on the example input
    (InvalidModel if it does not fit)."""
    module, factory_example, _ = load_factory_output(spec, seed)
    dtype = parse_dtype(input_dtype) if input_dtype is not None else None
    shape = parse_shape(input_shape) if input_shape is not None else None
    if factory_example is not None and factory_example.dim() == 0:
        raise InvalidModel(f"factory of '{spec}' returned a 0-d example input; it needs a batch dimension of size 1")
    if factory_example is not None and shape is None and dtype in (None, factory_example.dtype):
        example = factory_example[:1]
    else:
        example = None
    if shape is None:
        if factory_example is not None:
            shape = (1, *factory_example.shape[1:])
        elif inst is not None and len(inst.inputs) == 1 and inst.inputs[0].shape:
            shape = (1, *(int(d) for d in inst.inputs[0].shape))
        else:
            raise InvalidModel(f"--input-shape: needed for '{spec}' (its factory returns no example input); "
                               f"give e.g. --input-shape 1,3,32,32")
    if dtype is None:
        dtype = factory_example.dtype if factory_example is not None else torch.float32
    high = None
    if not dtype.is_floating_point:
        if input_high is not None:
            high = int(input_high)
        elif factory_example is not None and not factory_example.dtype.is_floating_point and factory_example.numel():
            high = int(factory_example.max()) + 1
        if high is None:
            raise InvalidModel(f"--input-high: needed with --input-dtype {str(dtype).removeprefix('torch.')} "
                               f"(the exclusive upper bound of the random ids, e.g. the vocabulary size)")
        if high < 1:
            raise InvalidModel(f"--input-high: must be at least 1, got {high}")
    per_sample = tuple(shape[1:])

    def inputs(n: int) -> torch.Tensor:
        return synthetic_inputs(n, per_sample, dtype, high, RUN_INPUT_SEED)

    def calibration(n: int = CALIBRATION_INPUTS) -> torch.Tensor:
        return synthetic_inputs(n, per_sample, dtype, high, CALIBRATION_SEED)

    if example is None:
        example = inputs(1)
    if check:
        check_forward(module, example)
    return module, None, example, inputs, calibration


def factory_name(spec: str) -> str:
    """The factory's name (last part of ``FACTORY``), the default instance name."""
    return _split_spec(spec)[1].rsplit(".", 1)[-1]


# ----- capture errors -----------------------------------------------------------------------

@contextlib.contextmanager
def quiet_torch() -> Iterator[None]:
    """Hold back what torch.export writes while it fails: its log records (dropped) and
    what goes to ``sys.stderr`` (the partial graph it prints; written out after all if
    the block succeeds, so Python warnings still show)."""
    buffer = io.StringIO()
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    ok = False
    try:
        with contextlib.redirect_stderr(buffer):
            yield
        ok = True
    finally:
        logging.disable(previous)
        if ok and buffer.getvalue():
            sys.stderr.write(buffer.getvalue())


def _hint(e: BaseException) -> str:
    if "data-dependent" in str(e) or "GuardOnDataDependent" in type(e).__name__:
        return " (Python control flow on tensor values? use torch.where or torch.cond)"
    return ""


def _through_capture(e: BaseException) -> bool:
    source = importlib.import_module("splitopt.torch.capture").__file__
    if source is None:  # not loaded from a file: no frame can be in it
        return False
    target = Path(source).resolve()
    return any(Path(frame.f_code.co_filename).resolve() == target for frame, _ in traceback.walk_tb(e.__traceback__))


def capture_failure(module: torch.nn.Module, example: torch.Tensor, e: BaseException) -> InvalidModel:
    """The one-line InvalidModel for capture error ``e``: ``example input of shape (...)
    does not fit the module: ...`` when the plain forward fails on ``example`` too, else
    ``the module cannot be captured by torch.export: ...``."""
    try:
        with quiet_torch():
            check_forward(module, example)
    except InvalidModel as fit:
        return fit
    return InvalidModel(f"the module cannot be captured by torch.export: {one_line(e)}{_hint(e)}")


@contextlib.contextmanager
def capture_errors(module: torch.nn.Module, example: torch.Tensor, what: str = "profiling the module") -> Iterator[None]:
    """Run a block that captures ``module`` on ``example`` (``capture``, ``profile``) with
    torch's failure output held back; an exception from the capture becomes the one-line
    InvalidModel of :func:`capture_failure`, any other non-splitopt exception
    ``<what> failed: Type: first line``. Splitopt errors pass through."""
    try:
        with quiet_torch():
            yield
    except SplitoptError:
        raise
    except Exception as e:  # noqa: BLE001 - reported as bad input, one line
        if _through_capture(e):
            raise capture_failure(module, example, e) from e
        raise InvalidModel(f"{what} failed: {one_line(e)}") from e


def capture_checked(module: torch.nn.Module, example_input: torch.Tensor, rename: Callable[[str], str] | None = None,
                    input_bits: int = 8):
    """:func:`splitopt.torch.capture.capture` with its failures as one-line InvalidModel
    (wrong input for the module, untraceable module) and torch's failure output held back."""
    from splitopt.torch.capture import capture

    try:
        with quiet_torch():
            return capture(module, example_input, rename=rename, input_bits=input_bits)
    except SplitoptError:
        raise
    except Exception as e:  # noqa: BLE001 - any export failure is bad input
        raise capture_failure(module, example_input, e) from e
