"""The models the torch bridge's commands rebuild by name: the built-in architectures
(``splitopt.torch.architectures``), the digits CNN of ``splitopt retrain``, or a user
model ``PATH.py:FACTORY`` (``splitopt.torch.user_model``), with their seeded run and
calibration inputs. (The weights ``splitopt retrain --save`` wrote for a multiview plan:
:func:`splitopt.torch.multiview.run.retrained`.)"""

from __future__ import annotations

from splitopt.torch.seeds import CALIBRATION_IMAGES, CALIBRATION_SEED, DIGITS, RUN_INPUT_SEED


def model_names() -> list[str]:
    """The built-in model names; any ``PATH.py:FACTORY`` or ``package.module:FACTORY`` spec
    names a user model (:mod:`splitopt.torch.user_model`)."""
    from splitopt.torch.architectures import MODELS, SMALL_MODELS

    return sorted(MODELS) + sorted(SMALL_MODELS) + [DIGITS]


def build_model(name: str, seed: int, inst=None, *, input_shape: str | None = None, input_dtype: str | None = None,
                input_high: int | None = None):
    """``(module, rename, example input, run inputs(n), calibration inputs(n=8))`` of model
    ``name``: a built-in name or a user spec ``PATH.py:FACTORY`` / ``package.module:FACTORY``
    (``rename`` None; ``input_shape``/``input_dtype``/``input_high`` set its inputs, see
    :func:`splitopt.torch.user_model.load_user_model`). InvalidModel (one line) for an
    unknown name, a user model that cannot be loaded, or input options given for a
    built-in model."""
    from splitopt.core.errors import InvalidModel

    if ":" in name:
        from splitopt.torch.user_model import load_user_model

        return load_user_model(name, seed, input_shape=input_shape, input_dtype=input_dtype,
                               input_high=input_high, inst=inst)
    given = [opt for opt, v in (("--input-shape", input_shape), ("--input-dtype", input_dtype),
                                ("--input-high", input_high)) if v is not None]
    if given:
        raise InvalidModel(f"{given[0]}: applies to user models (PATH.py:FACTORY), not to the built-in model '{name}'")
    from splitopt.torch import architectures as arch

    if name in arch.MODELS:
        module, rename = arch.MODELS[name](seed=seed)
        size = int(inst.inputs[0].shape[-1]) if inst is not None and inst.inputs[0].shape else 224
        example = arch.synthetic_images(1, size=size, seed=RUN_INPUT_SEED)
        return (module, rename, example, lambda n: arch.synthetic_images(n, size=size, seed=RUN_INPUT_SEED),
                lambda n=CALIBRATION_IMAGES: arch.synthetic_images(n, size=size, seed=CALIBRATION_SEED))
    if name == DIGITS:  # real data: scikit-learn's digits (test images to run, train images to calibrate)
        x_train, _, x_test, _ = arch.digits_data()
        return (arch.digits_cnn(seed), None, x_test[:1], lambda n: x_test[:n],
                lambda n=CALIBRATION_IMAGES: x_train[:n])
    if name in arch.SMALL_MODELS:
        module, rename = arch.SMALL_MODELS[name](seed=seed)
        example = arch.synthetic_tokens(1, seed=RUN_INPUT_SEED)
        return (module, rename, example, lambda n: arch.synthetic_tokens(n, seed=RUN_INPUT_SEED),
                lambda n=CALIBRATION_IMAGES: arch.synthetic_tokens(n, seed=CALIBRATION_SEED))
    raise InvalidModel(f"--model: unknown model '{name}' (choose from {', '.join(model_names())}, "
                       f"or give a user model as PATH.py:FACTORY)")
