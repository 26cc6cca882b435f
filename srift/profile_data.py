"""The Profile file format, schema ``srift.profile/1`` (see docs/contracts.md).

A Profile is what srift knows about one model independent of the cluster: per-layer FLOPs
and bytes (per sample; 1 MAC = 2 FLOPs), DDP gradient buckets, memory, and the timings
measured where it was profiled. It travels as JSON (never pickle) and is validated
against ``srift/schemas/profile.schema.json`` on load.
"""
from __future__ import annotations

import hashlib
import json
import math
import numbers
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from srift.checks import INT_MAX
from srift.files import read_input_text

__all__ = [
    "SCHEMA",
    "SUPPORTED_SCHEMAS",
    "LAYER_KINDS",
    "LayerProfile",
    "BucketProfile",
    "Timings",
    "Measurement",
    "Profile",
    "profile_schema",
    "ALLREDUCE_DTYPE_BYTES",
    "check_allreduce_dtype",
]

SCHEMA = "srift.profile/1"
SUPPORTED_SCHEMAS = (SCHEMA,)
LAYER_KINDS = ("matmul", "conv", "attention", "norm", "elementwise", "embedding", "pool", "recurrent", "other")
PRECISIONS = ("fp32", "tf32", "amp")
# Bytes per gradient element a DDP communication hook sends (Profile note "allreduce dtype").
ALLREDUCE_DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
# Element sizes a gradient can have (float16/bfloat16 to complex128): a bucket's bytes / numel
GRADIENT_ELEMENT_SIZES = (1, 2, 4, 8, 16)


def check_allreduce_dtype(value: Any) -> None:
    """ValueError naming the field unless ``value`` is None or a key of ALLREDUCE_DTYPE_BYTES."""
    if value is not None and value not in ALLREDUCE_DTYPE_BYTES:
        raise ValueError(f"allreduce_dtype: expected one of {', '.join(ALLREDUCE_DTYPE_BYTES)} or None, got {value!r}")


# A profile nests a few levels; thousands (``[[[[...]]]]``) exhaust Python's recursion limit.
_TOO_DEEP = "arrays or objects nested too deeply to be a profile"


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@lru_cache(maxsize=1)
def profile_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``srift.profile/1``."""
    from importlib import resources

    text = resources.files("srift").joinpath("schemas/profile.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def _json_path(parts: Any) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _short(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _legacy_bytes_dtype(data: dict[str, Any]) -> str | None:
    """A profile's `bytes_dtype`, warning about an AMP profile from a real device written before
    srift recorded it: its activations and layer bytes are autocast's, which predictions halve
    again for AMP (twice the local batch said to fit). It is read as it is; re-profile it."""
    value = data.get("bytes_dtype")
    if value is None and data.get("precision") == "amp" and data.get("device") != "meta":
        warnings.warn(f"profile {data.get('model')!r}: an AMP profile taken on {data.get('device')} before srift "
                      "recorded bytes in the model's dtype; its activations count half their size twice in "
                      "predictions (too large a local batch may be said to fit): profile it again", stacklevel=4)
    return value


def _first_non_finite(data: Any) -> tuple[list[Any], float] | None:
    """The path and value of the first infinite or NaN float in ``data``, else None. JSON reads
    a number past a double (1e400) as infinity, and a profile built in Python may hold one;
    the schema's bounds would name some of them, and the writer none."""
    stack: list[tuple[list[Any], Any]] = [([], data)]
    while stack:  # iterative: a deeply nested file must not exhaust the recursion limit here
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path, value
        if isinstance(value, dict):
            stack.extend((path + [k], v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((path + [i], v) for i, v in reversed(list(enumerate(value))))
    return None


def _schema_message(err: Any) -> str:
    """jsonschema's message, with bounds written short: its own repeats the value, which may
    have hundreds of digits (10**400 is a valid JSON integer)."""
    bound = {"maximum": "greater than the maximum", "minimum": "less than the minimum",
             "exclusiveMaximum": "not less than the exclusive maximum",
             "exclusiveMinimum": "not greater than the exclusive minimum"}.get(err.validator)
    if bound is not None:
        return f"{bound} of {err.validator_value:g}"
    return err.message


def _validate_schema(data: Any) -> None:
    """Raise ValueError naming the JSON path and value of the first schema violation."""
    if not isinstance(data, dict):
        raise ValueError(f"$: a profile must be a JSON object, got {type(data).__name__}")
    bad_number = _first_non_finite(data)
    if bad_number is not None:
        path, value = bad_number
        raise ValueError(f"{_json_path(path)}: invalid value {value!r}: not a finite number (a number past "
                         "1.8e308, such as 1e400, reads as infinity)")
    version = data.get("schema")
    if version not in SUPPORTED_SCHEMAS:
        raise ValueError(
            f"$.schema: unsupported profile schema {version!r}; supported versions: {', '.join(SUPPORTED_SCHEMAS)}"
        )
    import jsonschema

    validator = jsonschema.Draft202012Validator(profile_schema())
    errors = list(validator.iter_errors(data))
    for e in errors:  # include sub-errors of anyOf/oneOf so the deepest path is named
        errors.extend(e.context or ())
    if errors:
        # deepest error first (the first in file order among those): it names the offending
        # field rather than a parent
        err = max(errors, key=lambda e: len(e.absolute_path))
        path = _json_path(err.absolute_path)
        raise ValueError(f"{path}: invalid value {_short(err.instance)}: {_schema_message(err)}")
    # cross-field rules JSON Schema cannot express
    if data["param_count"] > data["param_bytes"]:
        raise ValueError(f"$.param_count: invalid value {_short(data['param_count'])}: more parameters than "
                         f"param_bytes ({data['param_bytes']}), at least one byte each")
    n_layers = len(data["layers"])
    for k, b in enumerate(data["buckets"]):
        if b["index"] != k:
            raise ValueError(f"$.buckets[{k}].index: invalid value {b['index']}: expected {k}")
        if b["last_layer"] >= n_layers:
            raise ValueError(
                f"$.buckets[{k}].last_layer: invalid value {b['last_layer']}: only {n_layers} layers"
            )
        numel = b.get("numel")
        if numel is not None and not (b["bytes"] == numel == 0 or (
                numel > 0 and b["bytes"] % numel == 0 and b["bytes"] // numel in GRADIENT_ELEMENT_SIZES)):
            raise ValueError(f"$.buckets[{k}].numel: invalid value {numel}: bytes ({b['bytes']}) must be numel "
                             f"x a gradient element size ({', '.join(map(str, GRADIENT_ELEMENT_SIZES))})")
    # DDP buckets every trainable parameter's gradient at most once (fewer bytes where it is
    # told to ignore parameters): more is an edited file, and made the allreduce 100x what the
    # model sends.
    bucketed = sum(b["bytes"] for b in data["buckets"])
    if bucketed > data["trainable_param_bytes"]:
        raise ValueError(f"$.buckets: invalid value: their bytes add up to {bucketed}, more than "
                         f"trainable_param_bytes ({data['trainable_param_bytes']}); DDP buckets each gradient once")
    t = data.get("timings")
    if t is not None:
        n = len(t["batch_sizes"])
        for key, val in t.items():
            if isinstance(val, list) and len(val) != n:
                raise ValueError(
                    f"$.timings.{key}: invalid value {_short(val)}: expected {n} entries, one per batch size"
                )
    for i, m in enumerate(data["measurements"]):
        try:
            Measurement.from_dict(m)  # the checks of Profile.add_measurement, so a file cannot skip them
        except ValueError as e:
            raise ValueError(f"$.measurements[{i}].{e}") from None


@dataclass
class LayerProfile:
    """One layer: a leaf module, or a parent's own ops (``pseudo``) such as residual adds.

    FLOPs and ``forward_bytes`` are per sample; ``param_bytes`` is absolute; times are
    medians in seconds at the profile's example batch on its device (None on meta).
    """

    name: str
    type: str
    kind: str
    forward_flops: float
    backward_flops: float
    forward_bytes: float
    param_bytes: int
    forward_s: float | None = None
    backward_s: float | None = None
    pseudo: bool = False  # added field: True for a parent module's own (functional) ops

    def to_dict(self) -> dict[str, Any]:
        # the field names read once (Profile.validate turns every layer into a dict on each
        # Engine built: dataclasses.fields was a third of that on BERT's 175 layers)
        return {name: getattr(self, name) for name in _LAYER_FIELDS}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LayerProfile:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


_LAYER_FIELDS = tuple(f.name for f in fields(LayerProfile))


@dataclass
class BucketProfile:
    """A DDP gradient bucket in reduction order; ``last_layer`` indexes ``Profile.layers``."""

    index: int
    bytes: int
    param_names: list[str]
    last_layer: int
    ready_fraction: float
    # added field: the share of the backward's FLOPs done when the bucket was ready, in the
    # order the profiled backward ran (what a CPU or meta profile's ready time stands in for)
    ready_flops_fraction: float | None = None
    # added field: the bucket's gradient elements (bytes / their element size), what a comm
    # hook's cast sends (Profile note "allreduce dtype"); None: an older profile
    numel: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "index": self.index,
            "bytes": self.bytes,
            "param_names": list(self.param_names),
            "last_layer": self.last_layer,
            "ready_fraction": self.ready_fraction,
        }
        if self.ready_flops_fraction is not None:
            out["ready_flops_fraction"] = self.ready_flops_fraction
        if self.numel is not None:
            out["numel"] = self.numel
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BucketProfile:
        return cls(
            index=d["index"],
            bytes=d["bytes"],
            param_names=list(d["param_names"]),
            last_layer=d["last_layer"],
            ready_fraction=d["ready_fraction"],
            ready_flops_fraction=d.get("ready_flops_fraction"),
            numel=d.get("numel"),
        )


@dataclass
class Timings:
    """Whole-model medians (seconds) per local batch size, with p10/p90 spread.

    Per-batch lists align with ``batch_sizes``. ``optimizer_s`` does not depend on the batch.
    Added fields beyond the contract: ``iteration_p10/p90``, ``optimizer_p10/p90`` and
    ``peak_memory_bytes`` (CUDA ``max_memory_allocated`` per batch size; None elsewhere).
    """

    batch_sizes: list[int]
    forward_s: list[float]
    backward_s: list[float]
    optimizer_s: float
    iteration_s: list[float]
    forward_p10: list[float]
    forward_p90: list[float]
    backward_p10: list[float]
    backward_p90: list[float]
    repeats: int
    warmup: int
    iteration_p10: list[float] = field(default_factory=list)
    iteration_p90: list[float] = field(default_factory=list)
    optimizer_p10: float | None = None
    optimizer_p90: float | None = None
    peak_memory_bytes: list[int | None] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), list) else v) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Timings:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


@dataclass
class Measurement:
    """A measured iteration time of real training on ``device`` at ``local_batch``.

    ``gpus`` = 1: one GPU alone; ``device`` names the GPU ("T4", "A100-40GB").
    ``gpus`` > 1: a data-parallel iteration with that many ranks on one instance, each at
    ``local_batch``; ``device`` names the instance type ("p3.16xlarge"). It carries what a
    single GPU cannot show: host contention and intra-instance allreduce on that instance.

    ``accumulation_steps`` = k > 1 (one GPU only): the timed iteration is one optimizer step
    of k gradient-accumulation micro-steps, each at ``local_batch`` (``forward_s`` and
    ``backward_s``, when given, are one micro-step's). The engine reads it as the plain
    iteration it implies (srift.engine note "accumulated measurement").

    ``precision``: the arithmetic the timed run used ("fp32", "tf32", "amp", as
    ``Profile.precision`` names them); None (what files written before the field hold): the
    profile's ``precision`` (Profile.measurement_precision). A prediction anchors only on runs
    at the precision it predicts (srift.engine note "measurement precision")."""

    device: str
    local_batch: int
    iteration_s: float
    forward_s: float | None = None
    backward_s: float | None = None
    source: str = "user"
    recorded_at: str = field(default_factory=_now)
    gpus: int = 1
    accumulation_steps: int = 1
    precision: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.accumulation_steps == 1:  # files written before the field stay as they were
            del d["accumulation_steps"]
        if self.precision is None:  # the same: absent reads as the profile's precision
            del d["precision"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        """Build from a dict with the checks of Profile.add_measurement (ValueError naming the field)."""
        if not isinstance(d, Mapping):
            raise ValueError(f"measurement: expected an object with device, local_batch and iteration_s, got {d!r}")
        missing = [name for name in ("device", "local_batch", "iteration_s") if name not in d]
        if missing:
            raise ValueError(f"measurement: missing {', '.join(missing)} (has {', '.join(map(str, d)) or 'nothing'})")
        return _checked_measurement(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


def _check_positive(name: str, value: Any, *, integer: bool = False, optional: bool = False) -> Any:
    """``value`` as a Python int (``integer``) or float, after checking it is one and > 0;
    numpy scalars are taken (numbers.Integral / numbers.Real), None too when ``optional``."""
    if value is None and optional:
        return None
    expected = "a positive integer" if integer else "a positive finite number"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected {expected}, got {value!r}")
    if isinstance(value, numbers.Integral):
        number: Any = int(value)  # exact, however large: the bounds below name it
    else:
        number = float(value)
        if integer:
            if not number.is_integer():  # also NaN and infinity
                raise ValueError(f"{name}: expected {expected}, got {value!r}")
            number = int(number)
    if not (number > 0 and (integer or math.isfinite(number))):
        raise ValueError(f"{name}: expected {expected}, got {value!r}")
    return number


# `srift validate` names its emulated CPU workers so (emu-cpu-t1, ...): devices of the catalog it
# builds for the run, which a profile keeps when validate adds its calibration to it
EMULATED_DEVICE_PREFIX = "emu-"

MIN_TIMED_S, MAX_TIMED_S = 1e-6, 1e7  # a microsecond (under one kernel launch) to 16 weeks


def _check_timestamp(name: str, value: Any) -> None:
    try:
        # "Z" spelled out: Python 3.10's fromisoformat does not read it
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        raise ValueError(f"{name}: expected an ISO 8601 time such as '2026-01-21T10:00:00Z', got {value!r}") from None


def _checked_measurement(
    device: Any,
    local_batch: Any,
    iteration_s: Any,
    forward_s: Any = None,
    backward_s: Any = None,
    source: Any = "user",
    recorded_at: Any = None,
    gpus: Any = 1,
    accumulation_steps: Any = 1,
    precision: Any = None,
) -> Measurement:
    """A Measurement after the checks every one passes, whether added by hand
    (Profile.add_measurement) or read from a file; ValueError names the bad field and value.
    ``recorded_at`` None: now."""
    if not isinstance(device, str) or not device.strip():
        raise ValueError(f"device: expected a non-empty string, got {device!r}")
    local_batch = _check_positive("local_batch", local_batch, integer=True)
    iteration_s = _check_positive("iteration_s", iteration_s)
    forward_s = _check_positive("forward_s", forward_s, optional=True)
    backward_s = _check_positive("backward_s", backward_s, optional=True)
    gpus = _check_positive("gpus", gpus, integer=True)
    accumulation_steps = _check_positive("accumulation_steps", accumulation_steps, integer=True)
    if accumulation_steps > 1 and gpus > 1:
        raise ValueError(f"accumulation_steps: {accumulation_steps!r} micro-steps are supported for one GPU's "
                         f"iteration (gpus=1), got gpus={gpus!r}: time the instance without accumulation")
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"source: expected a non-empty string, got {source!r}")
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {', '.join(PRECISIONS)}, or None for the profile's, "
                         f"got {precision!r}")
    # Past these a value is a typo, and the engine's fit would divide by ~0 or overflow.
    for name, count in (("local_batch", local_batch), ("gpus", gpus), ("accumulation_steps", accumulation_steps)):
        if count > INT_MAX:
            raise ValueError(f"{name}: expected at most {INT_MAX}, got {count!r}")
    for name, value in (("iteration_s", iteration_s), ("forward_s", forward_s), ("backward_s", backward_s)):
        if value is not None and not MIN_TIMED_S <= value <= MAX_TIMED_S:
            raise ValueError(f"{name}: expected seconds in [{MIN_TIMED_S:g}, {MAX_TIMED_S:g}], got {value!r}")
    if recorded_at is not None:
        _check_timestamp("recorded_at", recorded_at)
    parts = [x for x in (forward_s, backward_s) if x is not None]
    if parts and sum(parts) > iteration_s / accumulation_steps * 1.5:
        # forward + backward (one micro-step's) cannot much exceed the iteration they are part of
        raise ValueError(
            f"iteration_s: {iteration_s!r} is smaller than forward_s + backward_s = {sum(parts)!r}"
            + (f" per micro-step x {accumulation_steps} micro-steps" if accumulation_steps > 1 else "")
        )
    return Measurement(
        device=device.strip(),
        local_batch=int(local_batch),
        iteration_s=float(iteration_s),
        forward_s=None if forward_s is None else float(forward_s),
        backward_s=None if backward_s is None else float(backward_s),
        source=source,
        recorded_at=_now() if recorded_at is None else recorded_at,
        gpus=int(gpus),
        accumulation_steps=int(accumulation_steps),
        precision=precision,
    )


@dataclass
class Profile:
    """Everything srift knows about a model independent of the cluster (``srift.profile/1``)."""

    model: str
    device: str
    precision: str
    example_batch_size: int
    param_count: int
    param_bytes: int
    trainable_param_bytes: int
    optimizer: str
    optimizer_state_bytes: int
    activation_bytes_per_sample: float
    layers: list[LayerProfile]
    buckets: list[BucketProfile]
    timings: Timings | None = None
    measurements: list[Measurement] = field(default_factory=list)
    device_gpu: str | None = None
    bucket_cap_mb: float = 25
    first_bucket_mb: float = 1
    buffer_bytes: int = 0  # added field: non-parameter state (e.g. BatchNorm running stats)
    allreduce_dtype: str | None = None  # added field: a DDP comm hook's dtype (note "allreduce dtype")
    # added field: DDP built with find_unused_parameters=True (buckets in registration order)
    find_unused_parameters: bool = False
    # added fields: DDP's per-iteration buffer broadcast (simulator.hpp note "buffer
    # broadcast"). The messages DDP's broadcast carries, bytes (one per dtype, each closed once
    # it reaches 250 MiB; srift.buckets.buffer_broadcasts); None: an older profile, whose buffers are
    # taken as one message of buffer_bytes. forward_sync_buffers: as passed to DDP
    # (broadcast_buffers before torch 2.13); False: no broadcast.
    buffer_broadcast_bytes: list[int] | None = None
    forward_sync_buffers: bool = True
    # added field: the dtype the analysis pass counted bytes in. "model": the model's own (no
    # autocast; what every profiler since writes). None: an older profile, whose AMP bytes on a
    # real device were autocast's, which predictions then halved again.
    bytes_dtype: str | None = "model"
    # added fields: the PyTorch that profiled the model (torch.__version__) and the CUDA it was
    # built with (torch.version.cuda; None for a CPU build); None: an older profile. The
    # default target release of recommend/predict's wheel check (srift.torch_support).
    torch_version: str | None = None
    torch_cuda: str | None = None
    created_at: str = field(default_factory=_now)
    srift_version: str = field(default_factory=lambda: _version())
    schema: str = SCHEMA

    # -- helpers -------------------------------------------------------------------------
    def flops_ready_fractions(self) -> list[float]:
        """Each bucket's ready time as a share of the backward's FLOPs, what a CPU or meta
        profile's ready time stands in for on a GPU: recorded in the order the backward ran
        (``ready_flops_fraction``), else (older profiles) the layers' share in layer order,
        which puts a parent module's or the root's parameter, listed after its children, too
        early. Non-decreasing; layer-less or FLOP-less profiles keep ``ready_fraction``."""
        buckets = self.buckets
        if buckets and all(b.ready_flops_fraction is not None for b in buckets):
            return [float(b.ready_flops_fraction) for b in buckets]  # type: ignore[arg-type]
        backward = [float(layer.backward_flops) for layer in self.layers]
        total = sum(backward)
        if total <= 0:
            return [float(b.ready_fraction) for b in buckets]
        # The backward visits layers in reverse: layer l's gradients exist once every layer
        # at index >= l has run its backward.
        done_after, acc = [0.0] * len(backward), 0.0
        for i in range(len(backward) - 1, -1, -1):
            acc += backward[i]
            done_after[i] = acc / total
        fractions, previous = [], 0.0
        for b in buckets:
            fraction = done_after[b.last_layer] if 0 <= b.last_layer < len(done_after) else 1.0
            previous = max(previous, min(1.0, fraction))
            fractions.append(previous)
        return fractions

    def total_forward_flops(self) -> float:
        """Forward FLOPs per sample of the whole model (2 FLOPs per MAC)."""
        return float(sum(layer.forward_flops for layer in self.layers))

    def total_backward_flops(self) -> float:
        """Backward FLOPs per sample of the whole model."""
        return float(sum(layer.backward_flops for layer in self.layers))

    def total_forward_bytes(self) -> float:
        return float(sum(layer.forward_bytes for layer in self.layers))

    def gradient_bytes(self) -> int:
        """Bytes all-reduced per iteration (sum of allreduce_bucket_bytes)."""
        return int(sum(self.allreduce_bucket_bytes()))

    def broadcast_bytes(self) -> list[float]:
        """The messages of DDP's buffer broadcast before every iteration's forward, bytes
        (simulator.hpp note "buffer broadcast"): none under forward_sync_buffers=False; an
        older profile's buffers as one message."""
        if not self.forward_sync_buffers:
            return []
        if self.buffer_broadcast_bytes is None:
            return [float(self.buffer_bytes)] if self.buffer_bytes > 0 else []
        out = []
        for k, b in enumerate(self.buffer_broadcast_bytes):  # a profile built in Python skips the schema
            if isinstance(b, bool) or not isinstance(b, (int, float)) or not (0 <= b < math.inf):
                raise ValueError(f"buffer_broadcast_bytes[{k}]: expected a finite number of bytes >= 0, got {b!r}")
            out.append(float(b))
        return out

    def allreduce_bucket_bytes(self) -> list[float]:
        """Bytes each bucket's allreduce carries, in reduction order (note "allreduce dtype").

        Note "allreduce dtype". DDP groups gradients into buckets by their own size (``bytes``),
        whatever it then sends. A communication hook that casts each bucket before its
        allreduce (torch's ``fp16_compress_hook`` and ``bf16_compress_hook``: ``bucket.buffer()
        .to(dtype)``) sends its elements at 2 bytes each, whatever their own dtype;
        ``allreduce_dtype`` records it. A bucket holds only trainable parameters of one dtype,
        so it sends ``numel`` x 2 bytes: half an FP32 bucket, a BF16 bucket's own size. A
        profile written before buckets recorded ``numel`` scales the bytes by 2 over the mean
        element size of all parameters (param_bytes / param_count), exact only when every
        parameter has one dtype. A model whose parameters are already half precision (apex
        AMP O2) needs no hook: its buckets are half-size as profiled."""
        check_allreduce_dtype(self.allreduce_dtype)
        if self.allreduce_dtype is None:
            return [float(b.bytes) for b in self.buckets]
        sent = ALLREDUCE_DTYPE_BYTES[self.allreduce_dtype]
        mean_element = self.param_bytes / self.param_count if self.param_count > 0 and self.param_bytes > 0 else 4.0
        return [float(b.numel) * sent if b.numel is not None else float(b.bytes) * sent / mean_element
                for b in self.buckets]

    def measurement_precision(self, m: Measurement) -> str:
        """The precision a measurement was timed at: its own, else (recorded without one, as
        files written before the field were) the profile's."""
        return m.precision if m.precision is not None else self.precision

    def measurements_for(self, device: str) -> list[Measurement]:
        """Measurements taken on ``device`` (case-insensitive match on the device string)."""
        key = str(device).strip().lower()
        return [m for m in self.measurements if m.device.strip().lower() == key]

    def add_measurement(
        self,
        device: str,
        local_batch: int,
        iteration_s: float,
        forward_s: float | None = None,
        backward_s: float | None = None,
        source: str = "user",
        gpus: int = 1,
        accumulation_steps: int = 1,
        precision: str | None = None,
    ) -> Measurement:
        """Validate and append a measurement; ValueError names the bad field and value.
        gpus > 1: a DDP iteration on all ``gpus`` GPUs of instance type ``device``.
        accumulation_steps > 1: one GPU's optimizer step of that many micro-steps at
        ``local_batch`` each (Measurement). precision: what the run used ("fp32", "tf32",
        "amp", in any case: "AMP" is "amp", as the CLI's ``@AMP``); None: the profile's.
        Predictions at another precision do not use it."""
        if isinstance(precision, str) and precision.strip().lower() in PRECISIONS:
            precision = precision.strip().lower()  # anything else is refused as given
        m = _checked_measurement(device, local_batch, iteration_s, forward_s, backward_s, source=source, gpus=gpus,
                                 accumulation_steps=accumulation_steps, precision=precision)
        self.measurements.append(m)
        return m

    # -- (de)serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "model": self.model,
            "created_at": self.created_at,
            "srift_version": self.srift_version,
            "device": self.device,
            "device_gpu": self.device_gpu,
            "precision": self.precision,
            "example_batch_size": self.example_batch_size,
            "param_count": self.param_count,
            "param_bytes": self.param_bytes,
            "trainable_param_bytes": self.trainable_param_bytes,
            "buffer_bytes": self.buffer_bytes,
            "optimizer": self.optimizer,
            "optimizer_state_bytes": self.optimizer_state_bytes,
            "activation_bytes_per_sample": self.activation_bytes_per_sample,
            "bucket_cap_mb": self.bucket_cap_mb,
            "first_bucket_mb": self.first_bucket_mb,
            "allreduce_dtype": self.allreduce_dtype,
            "find_unused_parameters": self.find_unused_parameters,
            "buffer_broadcast_bytes": None if self.buffer_broadcast_bytes is None else list(self.buffer_broadcast_bytes),
            "forward_sync_buffers": self.forward_sync_buffers,
            "bytes_dtype": self.bytes_dtype,
            "torch_version": self.torch_version,
            "torch_cuda": self.torch_cuda,
            "layers": [layer.to_dict() for layer in self.layers],
            "buckets": [b.to_dict() for b in self.buckets],
            "timings": None if self.timings is None else self.timings.to_dict(),
            "measurements": [m.to_dict() for m in self.measurements],
        }

    @classmethod
    def from_dict(cls, data: Any) -> Profile:
        """Build from a dict, validating it first (ValueError naming the JSON path)."""
        if isinstance(data, dict) and isinstance(data.get("buckets"), list):
            # Older profilers wrote null for a bucket no layer owns; it is ready at the end of
            # the backward, as layer 0's (what the profiler writes now).
            buckets = [dict(b, last_layer=0) if isinstance(b, dict) and b.get("last_layer", 0) is None else b
                       for b in data["buckets"]]
            data = {**data, "buckets": buckets}
        try:
            _validate_schema(data)
        except RecursionError:  # the validator recurses once per level of nesting
            raise ValueError(f"$: {_TOO_DEEP}") from None
        return cls(
            schema=data["schema"],
            model=data["model"],
            created_at=data["created_at"],
            srift_version=data["srift_version"],
            device=data["device"],
            device_gpu=data["device_gpu"],
            precision=data["precision"],
            example_batch_size=data["example_batch_size"],
            param_count=data["param_count"],
            param_bytes=data["param_bytes"],
            trainable_param_bytes=data["trainable_param_bytes"],
            buffer_bytes=data.get("buffer_bytes", 0),
            optimizer=data["optimizer"],
            optimizer_state_bytes=data["optimizer_state_bytes"],
            activation_bytes_per_sample=data["activation_bytes_per_sample"],
            bucket_cap_mb=data["bucket_cap_mb"],
            first_bucket_mb=data["first_bucket_mb"],
            allreduce_dtype=data.get("allreduce_dtype"),
            find_unused_parameters=bool(data.get("find_unused_parameters", False)),
            buffer_broadcast_bytes=(None if data.get("buffer_broadcast_bytes") is None
                                    else [int(b) for b in data["buffer_broadcast_bytes"]]),
            forward_sync_buffers=bool(data.get("forward_sync_buffers", True)),
            bytes_dtype=_legacy_bytes_dtype(data),
            torch_version=data.get("torch_version"),
            torch_cuda=data.get("torch_cuda"),
            layers=[LayerProfile.from_dict(x) for x in data["layers"]],
            buckets=[BucketProfile.from_dict(x) for x in data["buckets"]],
            timings=None if data["timings"] is None else Timings.from_dict(data["timings"]),
            measurements=[Measurement.from_dict(x) for x in data["measurements"]],
        )

    def validate(self) -> None:
        """ValueError naming the JSON path and value where the profile breaks the bounds a
        profile file is held to. Profile.load checks files; predict, recommend and the other
        entry points call this, so a profile built or edited in Python is held to the same
        bounds. Numpy scalars are read as the numbers they hold. The answer is remembered for
        the profile's current content (the schema check takes ~40 ms on BERT-large's 343 layers;
        the content's digest ~2 ms)."""
        def plain(value: Any) -> Any:
            if isinstance(value, numbers.Integral):
                return int(value)
            if isinstance(value, numbers.Real):
                return float(value)
            raise TypeError(f"{type(value).__name__} {value!r}")

        try:
            text = json.dumps(self.to_dict(), default=plain)
        except (TypeError, ValueError) as e:
            raise ValueError(f"profile {self.model!r}: a field holds what a profile file cannot: {e}") from None
        digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
        if self.__dict__.get("_valid_digest") == digest:
            return
        try:
            _validate_schema(json.loads(text))
        except RecursionError:
            raise ValueError(f"profile {self.model!r}: $: {_TOO_DEEP}") from None
        except ValueError as e:
            raise ValueError(f"profile {self.model!r}: {e}") from None
        self.__dict__["_valid_digest"] = digest

    def to_json(self, indent: int | None = 1) -> str:
        data = self.to_dict()
        _validate_schema(data)  # never write a file we would refuse to read
        return json.dumps(data, indent=indent, allow_nan=False)

    @classmethod
    def from_json(cls, text: str, source: str = "<string>") -> Profile:
        def _reject(name: str) -> Any:
            raise ValueError(f"non-finite number {name} is not allowed in a profile")

        try:
            data = json.loads(text, parse_constant=_reject)
        except json.JSONDecodeError as e:
            raise ValueError(f"{source}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
        except ValueError as e:  # _reject's, or an integer of more digits than Python converts
            raise ValueError(f"{source}: {e}") from None
        except RecursionError:  # json recurses once per level of nesting
            raise ValueError(f"{source}: {_TOO_DEEP}") from None
        try:
            return cls.from_dict(data)
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None

    def save(self, path: str | Path) -> Path:
        """Write the profile as JSON (validated first); returns the path."""
        path = Path(path)
        path.write_text(self.to_json() + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        """Read and validate a profile JSON file (ValueError on any problem; never unpickles)."""
        path = Path(path)
        try:
            text = read_input_text(path)
        except OSError as e:
            raise ValueError(f"{path}: cannot read profile: {e.strerror or e}") from None
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not a UTF-8 JSON file ({e.reason} at byte {e.start})") from None
        return cls.from_json(text, source=str(path))


def _version() -> str:
    try:
        from srift import __version__

        return __version__
    except Exception:  # pragma: no cover - only when imported outside the package
        return "0.0.0"
