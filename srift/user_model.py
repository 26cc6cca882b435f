"""A user's own model for the command line: ``--model path/to/models.py:factory``.

The file is run as a Python module (it is the user's code, as ``python train.py`` would run
it) and ``factory(batch_size)`` must return what :func:`srift.zoo.build` returns: ``(model,
(inputs, targets), loss_fn)``, or ``(model, (inputs, targets))`` when the model's output is
itself the loss or has a ``.loss`` (``srift.profile``'s ``loss_fn=None``). The model is built
on the CPU; the profiler moves it (or, for ``--device meta``, a weightless copy). The file's
folder goes first on ``sys.path`` (and stays: a factory may import lazily), so its sibling
modules import as they do under ``python FILE.py``. Every failure is a ValueError naming the
file, the factory and what went wrong.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

__all__ = ["is_model_file", "build"]


def is_model_file(spec: str) -> bool:
    """Whether ``--model`` names a Python file (``FILE.py:FACTORY``) rather than a zoo model."""
    path = spec.rpartition(":")[0] if ":" in spec else spec
    return path.endswith(".py")


def _factory(spec: str) -> tuple[Callable[..., Any], str]:
    path_text, _, name = spec.rpartition(":")
    if not path_text:
        raise ValueError(f"--model {spec!r}: expected FILE.py:FACTORY, a function of the batch size that returns "
                         "(model, (inputs, targets), loss_fn)")
    if not name.isidentifier():
        raise ValueError(f"--model {spec!r}: {name!r} is not a Python function name")
    path = Path(path_text)
    if not path.is_file():
        raise ValueError(f"--model {spec!r}: no such file {str(path)!r}")
    module_name = f"srift_user_model_{abs(hash(str(path.resolve())))}"
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ValueError(f"--model {spec!r}: cannot load {str(path)!r} as Python")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module  # dataclasses and pickling-free helpers look themselves up here
    # as `python FILE.py` runs it: the file's own folder first on the path, for its sibling modules
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        loader_spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise ValueError(f"--model {spec!r}: {path.name} line {exc.lineno}: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed while loading
        raise ValueError(f"--model {spec!r}: running {path.name} failed: {type(exc).__name__}: {exc}") from exc
    factory = getattr(module, name, None)
    if not callable(factory):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module_name)
        raise ValueError(f"--model {spec!r}: {path.name} has no function {name!r}"
                         + (f" (it defines {', '.join(found)})" if found else ""))
    return factory, name


def build(spec: str, batch_size: int) -> tuple[Any, Any, Any, str]:
    """(model, batch, loss_fn, profile name "FILE.FACTORY") from ``FILE.py:FACTORY`` at ``batch_size``."""
    import torch

    factory, name = _factory(spec)
    try:
        built = factory(batch_size)
    except Exception as exc:  # noqa: BLE001 - the user's factory failed
        raise ValueError(f"--model {spec!r}: {name}({batch_size}) failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(built, tuple) or len(built) not in (2, 3):
        raise ValueError(f"--model {spec!r}: {name}({batch_size}) must return (model, (inputs, targets), loss_fn) "
                         f"or (model, (inputs, targets)), got {type(built).__name__}")
    model, batch = built[0], built[1]
    loss_fn = built[2] if len(built) == 3 else None
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"--model {spec!r}: {name}({batch_size})[0] must be a torch.nn.Module, got "
                         f"{type(model).__name__}")
    return model, batch, loss_fn, f"{Path(spec.rpartition(':')[0]).stem}.{name}"
