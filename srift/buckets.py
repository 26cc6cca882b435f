"""Gradient buckets exactly as ``torch.nn.parallel.DistributedDataParallel`` builds them.

How DDP (torch 2.x, checked against 2.13) assigns gradients to buckets:

1. Parameters: ``module.named_modules()`` in order, each module's own
   ``named_parameters(recurse=False)`` that require grad and are not in
   ``module._ddp_params_and_buffers_to_ignore``; a parameter shared by several modules
   (tied weights) is kept once, at its first occurrence. This is the registration order.
2. Construction: with the defaults (``find_unused_parameters=False``) DDP starts with ONE
   bucket holding everything, reduces it after the first backward, and at the start of
   the second iteration *rebuilds* the buckets from the order in which gradients became
   ready in that first backward (the reducer's ``rebuilt_params_``), with limits
   ``[first_bucket_bytes_cap, bucket_bytes_cap]``. These rebuilt buckets are what every
   later iteration uses, so they are what srift models.
3. ``compute_bucket_assignment_by_size`` (reducer.cpp): walk the tensors in order, keep one
   open bucket per (dtype, device); add the tensor's ``numel * element_size`` bytes; when the
   open bucket reaches ``>=`` its current limit, close it and move that (dtype, device) to
   the next limit (the last limit repeats). A parameter whose module produces sparse
   gradients (``nn.Embedding(sparse=True)``) gets a bucket of its own. Open buckets are
   appended at the end in the iteration order of the reducer's ``std::unordered_map``
   (:func:`hash_map_order`): for the dtypes a gradient can have, on cpu, meta and cuda:0,
   that is the reverse of the order the (dtype, device) pairs were first seen. In ready
   order the result is not sorted.
4. With ``find_unused_parameters=True`` DDP never rebuilds: it assigns in *registration*
   order with limits ``[first, cap]``, sorts buckets by their smallest index and reverses
   the list, so the 1 MiB bucket holds the first-registered parameters and is reduced last.

Byte caps: DDP's ``bucket_cap_mb`` is MiB (``* 1024 * 1024``). When DDP is built with the
default ``bucket_cap_mb=None`` the first bucket is 1 MiB (``dist._DEFAULT_FIRST_BUCKET_BYTES``);
when a user passes ``bucket_cap_mb=X`` explicitly, torch 2.13 uses X for the first bucket too,
so call :func:`ddp_buckets` with ``first_bucket_mb=X`` to model that.

Buffers (``forward_sync_buffers``, ``broadcast_buffers`` before torch 2.13, both True by
default): in the forward after a synchronising backward, i.e. once per iteration, DDP
broadcasts ``module.named_buffers()`` (minus the ignored names) from rank 0 with
``dist._broadcast_coalesced(..., 250 MiB)``, which groups them by the same rule (one open
message per (dtype, device), closed at ``>=`` 250 MiB) and sends one flat message per group:
:func:`buffer_broadcasts`.

This is an independent implementation (no private torch function is called); the tests
compare it with the buckets a real 1-process gloo DDP builds.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MIB",
    "DdpParam",
    "Bucket",
    "ddp_parameters",
    "assign_by_size",
    "hash_map_order",
    "ddp_buckets",
    "BROADCAST_BUCKET_BYTES",
    "buffer_broadcasts",
]

MIB = 1024 * 1024
# DistributedDataParallel.broadcast_bucket_size: the largest message of its buffer broadcast
BROADCAST_BUCKET_BYTES = 250 * MIB


@dataclass
class DdpParam:
    """One parameter as DDP's reducer sees it (registration index, canonical name)."""

    index: int
    name: str
    numel: int
    element_size: int
    dtype: str
    device: str
    sparse_grad: bool = False
    tensor: Any = field(default=None, repr=False, compare=False)

    @property
    def nbytes(self) -> int:
        return self.numel * self.element_size


@dataclass
class Bucket:
    """A DDP gradient bucket; ``param_indices`` index :func:`ddp_parameters`' list."""

    index: int
    param_indices: list[int]
    param_names: list[str]
    bytes: int
    dtype: str
    device: str
    numel: int = 0  # gradient elements: what a comm hook's cast sends is numel x its element size

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "param_indices": list(self.param_indices),
            "param_names": list(self.param_names),
            "bytes": self.bytes,
            "dtype": self.dtype,
            "device": self.device,
            "numel": self.numel,
        }


def ddp_parameters(model: Any) -> list[DdpParam]:
    """The parameters DDP reduces, in registration order (mirrors ``_build_params_for_reducer``)."""
    import torch

    ignore = set(getattr(model, "_ddp_params_and_buffers_to_ignore", ()) or ())
    seen: set[int] = set()
    out: list[DdpParam] = []
    for module_name, module in model.named_modules():
        sparse = isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and bool(
            getattr(module, "sparse", False)
        )
        for param_name, param in module.named_parameters(recurse=False):
            fqn = f"{module_name}.{param_name}" if module_name else param_name
            if not param.requires_grad or fqn in ignore:
                continue
            if id(param) in seen:  # tied weight: DDP keeps the first occurrence
                continue
            seen.add(id(param))
            out.append(
                DdpParam(
                    index=len(out),
                    name=fqn,
                    numel=param.numel(),
                    element_size=param.element_size(),
                    dtype=str(param.dtype).replace("torch.", ""),
                    device=str(param.device),
                    sparse_grad=sparse,
                    tensor=param,
                )
            )
    return out


# c10::ScalarType's values (torch/headeronly/core/ScalarType.h), by torch's dtype names
_SCALAR_TYPE = {name: value for value, name in enumerate((
    "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32", "complex64",
    "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16", "quint4x2", "quint2x4", "bits1x8", "bits2x4",
    "bits4x2", "bits8", "bits16", "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz", "uint16",
    "uint32", "uint64", "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7", "int1", "int2", "int3",
    "int4", "int5", "int6", "int7", "float8_e8m0fnu", "float4_e2m1fn_x2",
))}
# c10::DeviceType's values (torch/headeronly/core/DeviceType.h), by torch's device type names
_DEVICE_TYPE = {name: value for value, name in enumerate((
    "cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip", "fpga", "maia", "xla", "vulkan", "metal", "xpu",
    "mps", "meta", "hpu", "ve", "lazy", "ipu", "mtia", "privateuseone",
))}
_U64 = (1 << 64) - 1
# libstdc++'s bucket counts as the table grows (_Prime_rehash_policy: 13 first, then the least
# prime of its list >= twice the count), past the 46 dtypes of one device
_PRIMES = (13, 29, 59, 127, 257)


def _bucket_key_hash(dtype: str, device: str) -> int:
    """reducer.cpp's ``BucketKey::hash``: ``c10::get_hash(type, device)``, i.e. c10's
    ``hash_combine(hash(device), hash(type))``, with std::hash<c10::Device> packing the device
    type and index into ``type << 16 | uint8(index)`` and a ScalarType hashing as its value."""
    kind, _, index = device.partition(":")
    device_hash = (_DEVICE_TYPE[kind] << 16) | ((int(index) if index else -1) & 0xFF)
    value = _SCALAR_TYPE[dtype]
    return device_hash ^ ((value + 0x9E3779B9 + ((device_hash << 6) & _U64) + (device_hash >> 2)) & _U64)


def hash_map_order(keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The order a libstdc++ ``std::unordered_map`` (what torch's Linux wheels are built with)
    iterates (dtype, device) keys inserted in ``keys``' order, as reducer.cpp's
    ``compute_bucket_assignment_by_size`` walks its open buckets.

    libstdc++ keeps one singly linked list: a key whose hash bucket (hash mod the bucket
    count: 13 until a 14th key) is empty goes to the front, one whose bucket is taken goes
    just before that bucket's first key. Growing the table re-inserts the list in its order
    by the same rule. The differentiable dtypes on cpu, meta and cuda:0 all land in distinct
    hash buckets, so for them this is reverse first-seen order. A dtype or device this table
    does not know keeps that reverse order."""
    try:
        hashes = {key: _bucket_key_hash(*key) for key in keys}
    except (KeyError, ValueError):
        return list(reversed(keys))

    def insert(order: list[tuple[str, str]], key: tuple[str, str], buckets: int) -> None:
        bucket = hashes[key] % buckets
        at = next((i for i, k in enumerate(order) if hashes[k] % buckets == bucket), 0)
        order.insert(at, key)

    order: list[tuple[str, str]] = []
    buckets = _PRIMES[0]
    for key in keys:
        if len(order) + 1 > buckets:  # max_load_factor 1: grow, then re-insert in list order
            buckets = next((p for p in _PRIMES if p >= 2 * buckets), 0)
            if not buckets:
                return list(reversed(keys))
            previous, order = order, []
            for k in previous:
                insert(order, k, buckets)
        insert(order, key, buckets)
    return order


def assign_by_size(
    params: Sequence[DdpParam],
    order: Sequence[int],
    limits: Sequence[int],
    *,
    sort_by_min_index: bool = False,
) -> list[list[int]]:
    """Group ``order`` (indices into ``params``) into buckets under byte ``limits``.

    Same rule as reducer.cpp's ``compute_bucket_assignment_by_size``: a bucket closes once
    its size reaches ``>=`` the current limit of its (dtype, device); limits advance per
    (dtype, device) and the last one repeats.
    """
    if not limits or any(int(x) <= 0 for x in limits):
        raise ValueError(f"limits: must be a non-empty list of positive byte counts, got {list(limits)!r}")
    result: list[list[int]] = []
    open_buckets: dict[tuple[str, str], tuple[list[int], int]] = {}
    limit_pos: dict[tuple[str, str], int] = {}
    for i in order:
        p = params[i]
        if p.sparse_grad:  # sparse gradients are never coalesced
            result.append([i])
            continue
        key = (p.dtype, p.device)
        indices, size = open_buckets.get(key, ([], 0))
        indices.append(i)
        size += p.nbytes
        pos = limit_pos.setdefault(key, 0)
        if size >= limits[pos]:
            result.append(indices)
            indices, size = [], 0
            limit_pos[key] = min(pos + 1, len(limits) - 1)
        open_buckets[key] = (indices, size)
    # torch appends the open buckets as its std::unordered_map iterates them
    for key in hash_map_order(list(open_buckets)):
        indices = open_buckets[key][0]
        if indices:
            result.append(indices)
    if sort_by_min_index:
        result.sort(key=min)
    return result


def ddp_buckets(
    model: Any,
    bucket_cap_mb: float = 25,
    first_bucket_mb: float = 1,
    *,
    ready_order: Sequence[int] | None = None,
    find_unused_parameters: bool = False,
) -> list[Bucket]:
    """The buckets DDP reduces in steady state, bucket 0 first.

    ``ready_order``: indices into :func:`ddp_parameters` in the order their gradients became
    ready in one backward (what DDP records in its first iteration; the profiler measures
    it). Default: reverse registration order, which is what the backward produces for a
    model that uses its layers in registration order. Parameters missing from
    ``ready_order`` (unused in the measured backward) are appended in reverse registration
    order.
    """
    for label, value in (("bucket_cap_mb", bucket_cap_mb), ("first_bucket_mb", first_bucket_mb)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value != value:
            raise ValueError(f"{label}: must be a positive number of MiB, got {value!r}")
    params = ddp_parameters(model)
    if not params:
        return []
    cap = int(bucket_cap_mb * MIB)
    first = int(first_bucket_mb * MIB)
    if find_unused_parameters:
        # distributed.py: the small first bucket applies only when it is smaller
        limits = [first, cap] if first < cap else [cap]
        groups = assign_by_size(params, range(len(params)), limits, sort_by_min_index=True)
        groups = list(reversed(groups))
    else:
        if ready_order is None:
            order = list(reversed(range(len(params))))
        else:
            order = []
            seen: set[int] = set()
            for i in ready_order:
                if not 0 <= int(i) < len(params):
                    raise ValueError(f"ready_order: index {i!r} out of range [0, {len(params)})")
                if int(i) not in seen:
                    seen.add(int(i))
                    order.append(int(i))
            order += [i for i in reversed(range(len(params))) if i not in seen]
        # reducer.cpp rebuild_buckets: always [first_bucket_bytes_cap, bucket_bytes_cap]
        groups = assign_by_size(params, order, [first, cap])
    return [
        Bucket(
            index=k,
            param_indices=list(g),
            param_names=[params[i].name for i in g],
            bytes=sum(params[i].nbytes for i in g),
            dtype=params[g[0]].dtype,
            device=params[g[0]].device,
            numel=sum(params[i].numel for i in g),
        )
        for k, g in enumerate(groups)
    ]


def torch_ddp_buckets(model: Any, step: Any, **ddp_kwargs: Any) -> tuple[list[tuple[list[str], int]], dict]:
    """The gradient buckets torch's own DistributedDataParallel all-reduces once it has rebuilt
    them (at its second iteration), as (parameter names, bytes) in reduction order, and DDP's
    logging data (`_get_ddp_logging_data()`): what `ddp_buckets` is checked against. Wraps
    `model` in DDP with `ddp_kwargs`, runs `step(ddp_module)` (one forward, returning the loss)
    three times with a comm hook that records each bucket and reduces nothing, and zeroes the
    gradients. Needs an initialised process group (one gloo rank will do)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    names = {id(p.tensor): p.name for p in ddp_parameters(model)}
    ddp = DDP(model, **ddp_kwargs)
    seen: list[tuple[int, list[str], int]] = []

    def record(state, bucket):  # unannotated: DDP checks a hook's annotations
        buf = bucket.buffer()
        seen.append((bucket.index(), [names[id(p)] for p in bucket.parameters()], buf.numel() * buf.element_size()))
        done = torch.futures.Future()
        done.set_result(buf)
        return done

    ddp.register_comm_hook(None, record)
    for _ in range(3):  # DDP rebuilds at iteration 2; its logger records it at iteration 3
        seen.clear()
        step(ddp).backward()
    data = ddp._get_ddp_logging_data()
    ddp.zero_grad(set_to_none=True)
    seen.sort()
    if [s[0] for s in seen] != list(range(len(seen))):
        raise RuntimeError(f"DDP reduced buckets {[s[0] for s in seen]}, not each of 0..{len(seen) - 1} once")
    return [(s[1], s[2]) for s in seen], data


def buffer_broadcasts(model: Any, bucket_bytes: int = BROADCAST_BUCKET_BYTES) -> list[int]:
    """The messages of DDP's per-iteration buffer broadcast, bytes (empty: no buffers).

    Mirrors ``DistributedDataParallel._assign_modules_buffers`` (``named_buffers()``, each
    tensor once, minus ``_ddp_params_and_buffers_to_ignore``) and ``_broadcast_coalesced``'s
    grouping (:func:`assign_by_size` with one limit, DDP's ``broadcast_bucket_size``, sorted
    by smallest index).
    """
    ignore = set(getattr(model, "_ddp_params_and_buffers_to_ignore", ()) or ())
    buffers = [
        DdpParam(index=i, name=name, numel=b.numel(), element_size=b.element_size(),
                 dtype=str(b.dtype).replace("torch.", ""), device=str(b.device))
        for i, (name, b) in enumerate((n, b) for n, b in model.named_buffers() if n not in ignore)
    ]
    groups = assign_by_size(buffers, range(len(buffers)), [int(bucket_bytes)], sort_by_min_index=True)
    return [sum(buffers[i].nbytes for i in g) for g in groups if g]
