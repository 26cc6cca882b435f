"""srift.zoo: reference models with deterministic example batches and training losses.

``build(name, batch_size, device="cpu", **options) -> (model, batch, loss_fn)`` returns a model
in training mode, ``batch = (inputs, targets)`` and ``loss_fn(output, targets) -> scalar``.
``inputs`` is a Tensor (``model(inputs)``), a tuple (``model(*inputs)``) or a dict
(``model(**inputs)``); dimension 0 of every tensor is the batch. ``device="meta"`` builds
everything on the meta device, so GPT-2 Large can be analysed without memory.

Architectures are written with torch alone, faithfully to the published reference code, and
every model's parameter count equals the published one (see ``info(name)["params_source"]``).
The same name, batch size, options and seed give the same weights and the same batch.
"""
from __future__ import annotations

import difflib
from typing import Any

import torch
from torch import nn

from srift.zoo import bert, deepspeech2, gpt2, ncf, resnet, ssd, transformer_xl, vgg, yolov3
from srift.zoo._common import BatchFactory, LossFn, Options, ZooEntry

__all__ = ["build", "info", "names"]

_ENTRIES: dict[str, ZooEntry] = {
    e.name: e
    for module in (resnet, vgg, bert, gpt2, transformer_xl, yolov3, ssd, deepspeech2, ncf)
    for e in module.ENTRIES
}

# every model accepts these; `seed` fixes both the initial weights and the example batch
_COMMON_OPTIONS: dict[str, Any] = {"seed": 0}


def names() -> list[str]:
    """The model names `build` accepts, sorted."""
    return sorted(_ENTRIES)


def _entry(name: str) -> ZooEntry:
    if not isinstance(name, str) or name not in _ENTRIES:
        close = difflib.get_close_matches(str(name).lower(), names(), n=3, cutoff=0.4)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ValueError(f"unknown model name {name!r}; {hint}available: {', '.join(names())} (your own model: "
                         "srift.profile(model, ...) in Python, or FILE.py:FACTORY on the command line)")
    return _ENTRIES[name]


def _resolve_options(entry: ZooEntry, options: dict[str, Any]) -> Options:
    allowed = {**_COMMON_OPTIONS, **entry.defaults}
    resolved: Options = dict(allowed)
    for key, value in options.items():
        if key not in allowed:
            close = difflib.get_close_matches(key, list(allowed), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"unknown option {key!r} for model {entry.name!r}{hint}; "
                f"allowed: {', '.join(sorted(allowed)) or 'none'}"
            )
        default = allowed[key]
        # ints where ints are expected (bool is an int to Python, never a size here)
        if isinstance(default, bool) or isinstance(value, bool):
            ok = isinstance(value, bool) and isinstance(default, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int)
        elif isinstance(default, float):
            ok = isinstance(value, (int, float))
            value = float(value) if ok else value
        else:
            ok = isinstance(value, type(default))
        if not ok:
            raise ValueError(
                f"option {key} for model {entry.name!r} must be {type(default).__name__}, got {value!r}"
            )
        resolved[key] = value
    if entry.validate is not None:
        entry.validate(resolved)
    return resolved


def info(name: str) -> dict[str, Any]:
    """What a zoo model is: parameter count and its source, input shape per sample (at the
    default options), task, the unit batch_size counts, loss, default options. JSON-ready."""
    entry = _entry(name)
    defaults = _resolve_options(entry, {})
    return {
        "name": entry.name,
        "family": entry.family,
        "params": entry.params,
        "params_source": entry.params_source,
        "source": entry.source,
        "task": entry.task,
        "sample_unit": entry.sample_unit,
        "input_shape": list(entry.input_shape(defaults)),
        "loss": entry.loss,
        "default_options": defaults,
        "notes": entry.notes,
        **entry.extra,
    }


def build(
    name: str, batch_size: int, device: str | torch.device = "cpu", **options: Any
) -> tuple[nn.Module, tuple[Any, Any], LossFn]:
    """Build zoo model `name` with an example training batch of `batch_size` and its loss.

    Raises ValueError for an unknown name (suggesting the nearest ones), a batch_size that is
    not an integer >= 1, or an unknown or out-of-range option.
    """
    entry = _entry(name)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device must be a torch device such as 'cpu', 'cuda:0' or 'meta', got {device!r}"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(dev)!r} asked for, but this torch build sees no CUDA device")
    opts = _resolve_options(entry, options)

    if dev.type == "meta":
        # parameters never materialise, whatever the model's size
        with torch.device("meta"):
            model = entry.make_model(opts)
    else:
        # seeded on the CPU without disturbing the caller's global RNG, then moved
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(opts["seed"])
            model = entry.make_model(opts)
        if dev.type != "cpu":
            model = model.to(dev)
    tie = getattr(model, "tie_weights", None)
    if callable(tie):
        tie()  # re-share tied weights in case moving replaced the Parameter objects
    model.train()

    batch = entry.make_batch(BatchFactory(dev, opts["seed"]), batch_size, opts)
    return model, batch, entry.make_loss(opts)
