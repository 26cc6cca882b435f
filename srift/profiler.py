"""``srift.profile``: measure a PyTorch model layer by layer for the iteration model.

What one call does (see :func:`profile`):

1. Analysis pass at the example batch (also on ``meta``): forward pre/post hooks track the
   module stack; a dispatch mode (:class:`srift.flops.OpCounter`) attributes every aten op
   of the forward to the innermost running module, so each module gets its *own* FLOPs
   (a parent's residual adds and attention matmuls land in a pseudo-layer, nothing is
   double counted). Autograd nodes created by a module are claimed for it at its hooks,
   and ``torch._C._current_autograd_node()`` attributes backward ops to layers the same
   way. Saved-tensor hooks measure activation memory; post-accumulate-grad hooks record
   the order gradients become ready (what DDP's bucket rebuild uses).
2. Timing (not on meta): for every local batch size, ``warmup`` untimed iterations, then
   ``repeats`` timed ones (forward+loss, backward, optimizer step); medians with p10/p90.
   Then ``repeats`` hooked iterations at the example batch time every module call and
   every autograd node (torch.cuda.Event on CUDA, time.perf_counter on CPU) for per-layer
   times and the moment each gradient is ready (bucket ``ready_fraction``).

Loss contract: ``batch = (inputs, targets)``; inputs are a Tensor (``model(x)``), a tuple
(``model(*x)``), a dict (``model(**x)``) or any other object (``model(x)``), such as a
dataclass; ``loss_fn(output, targets)`` returns a scalar.
With ``loss_fn=None`` the loss is ``output.loss`` (or ``output["loss"]``) when present, else
the output itself when it is a scalar tensor, else ``output.sum()`` for a tensor output;
anything else is a ValueError. Dimension 0 of every tensor is the batch dimension; smaller
batches are slices, larger ones repeat the batch. Tensors are found, and resized, inside
tuples, lists, dicts, pytree-registered containers and dataclasses (rebuilt with
``dataclasses.replace``), at any depth; a batch holding tensors anywhere else cannot be
resized and is refused when another batch size is asked for.

Under ``precision="amp"`` the analysis pass runs without autocast, so bytes are in the
model's dtype (Profile ``bytes_dtype``); a model that runs only under autocast (say a
half-precision buffer multiplied with FP32 activations) is analysed under autocast instead,
its autocast-dtype tensors counted at the size of the model's own floating-point dtype.

FLOPs follow ``torch.utils.flop_counter`` (1 multiply-accumulate = 2 FLOPs; matmul, conv
and attention only). FLOPs and activation bytes in the Profile are per sample.

Side effects: the model is put in train mode and restored; buffers (BatchNorm statistics)
are restored; parameters are not changed (the optimizer runs with lr=0); ``.grad`` is
restored. A model moved to another ``device`` is moved back.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map

from srift.buckets import buffer_broadcasts, ddp_buckets, ddp_parameters
from srift.flops import FusedAttention, OpCounter, fused_attention_in_backward, kind_from_ops
from srift.profile_data import (
    PRECISIONS,
    BucketProfile,
    LayerProfile,
    Profile,
    Timings,
    check_allreduce_dtype,
)

__all__ = ["profile", "OPTIMIZERS", "layer_kind"]

OPTIMIZERS = ("adam", "adamw", "sgd")

# leaf module type -> kind; checked in order (subclasses first where it matters)
_KIND_BY_TYPE: list[tuple[tuple[type, ...], str]] = [
    ((nn.Linear, nn.Bilinear), "matmul"),
    ((nn.modules.conv._ConvNd,), "conv"),
    ((nn.MultiheadAttention,), "attention"),
    ((nn.Embedding, nn.EmbeddingBag), "embedding"),
    ((nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm, nn.LocalResponseNorm)
     + ((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()), "norm"),
    ((nn.modules.pooling._MaxPoolNd, nn.modules.pooling._AvgPoolNd, nn.modules.pooling._AdaptiveAvgPoolNd,
      nn.modules.pooling._AdaptiveMaxPoolNd, nn.modules.pooling._LPPoolNd), "pool"),
    ((nn.RNNBase, nn.modules.rnn.RNNCellBase), "recurrent"),
    ((nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU, nn.Mish, nn.Tanh, nn.Sigmoid, nn.Hardswish, nn.Hardsigmoid,
      nn.LeakyReLU, nn.ELU, nn.SELU, nn.PReLU, nn.Softmax, nn.LogSoftmax, nn.Dropout, nn.Dropout1d,
      nn.Dropout2d, nn.Dropout3d, nn.Identity, nn.Softplus, nn.Flatten, nn.Unflatten), "elementwise"),
]


def layer_kind(module: nn.Module, op_names: set[str], pointwise_only: bool) -> str:
    """Kind of a leaf module: by its type when known, else from the ops it ran."""
    for types, kind in _KIND_BY_TYPE:
        if isinstance(module, types):
            return kind
    return kind_from_ops(op_names, pointwise_only)


# ---------------------------------------------------------------------------------------
# small helpers


def _is_dataclass_instance(obj: Any) -> bool:
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)


def _tensors(obj: Any) -> list[torch.Tensor]:
    """Tensors inside nested tuples/lists/dicts/pytree containers and dataclasses, and in the
    attributes of another object that holds no tensor where pytree looks."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    leaves, _ = tree_flatten(obj)
    out: list[torch.Tensor] = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif _is_dataclass_instance(x):
            for f in dataclasses.fields(x):
                out += _tensors(getattr(x, f.name, None))
    if not out and not isinstance(obj, (tuple, list, dict)) and hasattr(obj, "__dict__"):
        # e.g. a ModelOutput-like object that is not registered with pytree
        for v in vars(obj).values():
            out += _tensors(v)
    return out


def _map_tensors(obj: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``obj`` with ``fn`` applied to every tensor inside pytree containers (tuples, lists,
    dicts, registered types) and dataclasses, at any depth; a dataclass is rebuilt with
    ``dataclasses.replace`` (fields with init=False are recomputed by its __init__). ``obj``
    itself when ``fn`` changed no tensor (a batch already on the device is not rebuilt)."""
    changed = False

    def leaf(x: Any) -> Any:
        nonlocal changed
        if isinstance(x, torch.Tensor):
            y = fn(x)
            changed = changed or y is not x
            return y
        if _is_dataclass_instance(x):
            fields = [f.name for f in dataclasses.fields(x) if f.init and hasattr(x, f.name)]
            mapped = {name: _map_tensors(getattr(x, name), fn) for name in fields}
            changes = {name: v for name, v in mapped.items() if v is not getattr(x, name)}
            if not changes:
                return x
            changed = True
            try:
                return dataclasses.replace(x, **changes)
            except Exception as e:  # e.g. a __post_init__ that refuses the new values
                raise ValueError(f"batch: cannot rebuild {type(x).__name__} with its tensors resized or moved "
                                 f"(dataclasses.replace failed: {type(e).__name__}: {e})") from e
        return x

    mapped = tree_map(leaf, obj)
    return mapped if changed else obj


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _storage_key(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage()._cdata
    except Exception:  # sparse/nested/subclass tensors have no plain storage
        return id(t)


def _pct(values: Sequence[float], q: float) -> float:
    """Percentile by linear interpolation (q in [0, 100])."""
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


class _Clock:
    """Timestamps: CUDA events on a CUDA device (read after one synchronize), else perf_counter."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def mark(self) -> Any:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def elapsed(self, a: Any, b: Any) -> float:
        if self.cuda:
            return a.elapsed_time(b) / 1000.0
        return b - a


def _batch_size(inputs: Any, targets: Any) -> int:
    sizes = {}
    for label, part in (("inputs", inputs), ("targets", targets)):
        for i, t in enumerate(_tensors(part)):
            if t.dim() == 0:
                raise ValueError(f"batch: {label} tensor #{i} is 0-dimensional; dimension 0 must be the batch")
            sizes[f"{label} tensor #{i} shape {tuple(t.shape)}"] = t.shape[0]
    if not sizes:
        raise ValueError("batch: inputs contain no tensor; cannot infer the batch size")
    distinct = set(sizes.values())
    if len(distinct) != 1:
        raise ValueError(f"batch: dimension 0 differs between tensors: {sizes}")
    size = int(distinct.pop())
    if size < 1:
        raise ValueError(f"batch: dimension 0 is 0, an empty batch ({', '.join(sizes)}); profile at least one sample")
    return size


def _resize_batch(obj: Any, full: int, b: int, label: str = "batch") -> Any:
    """Slice (b <= full) or repeat (b > full) dimension 0 of every tensor; a ValueError when
    some tensor the batch size was read from could not be reached (``_map_tensors``)."""
    if b == full:
        return obj

    def f(t: torch.Tensor) -> torch.Tensor:
        if b < full:
            return t[:b].clone()  # own storage: saved-tensor bytes must not see the full batch
        reps = -(-b // full)
        return t.repeat(reps, *([1] * (t.dim() - 1)))[:b]

    resized = _map_tensors(obj, f)
    left = [tuple(t.shape) for t in _tensors(resized) if t.dim() == 0 or t.shape[0] != b]
    if left:
        # e.g. a plain object holding tensors as attributes: its batch size was read, but it
        # cannot be rebuilt, and timing it as batch b would time the full batch again
        raise ValueError(
            f"batch: cannot resize {label} of type {type(obj).__name__} from batch {full} to {b}: tensors of shape "
            f"{', '.join(map(str, left[:3]))} are inside an object srift cannot rebuild (it resizes tensors in "
            "tuples, lists, dicts, dataclasses and pytree-registered types); pass the batch as one of those, "
            f"or profile with batch_sizes=[{full}]")
    return resized


def _call(model: nn.Module, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def _loss(output: Any, targets: Any, loss_fn: Callable[[Any, Any], Any] | None) -> torch.Tensor:
    if loss_fn is not None:
        try:
            loss = loss_fn(output, targets)
        except Exception as e:
            raise ValueError(f"loss_fn failed: {type(e).__name__}: {e}") from e
    else:
        loss = getattr(output, "loss", None)
        if loss is None and isinstance(output, dict):
            loss = output.get("loss")
        if loss is None and isinstance(output, torch.Tensor):
            loss = output if output.dim() == 0 else output.sum()
        if loss is None:
            if getattr(output, "loss", 0) is None or (isinstance(output, dict) and "loss" in output):
                # a Hugging Face model called without labels: its output has a loss field, left None
                raise ValueError(
                    f"loss_fn is None and the model output's loss ({type(output).__name__}.loss) is None: the model "
                    "computed no loss (a Hugging Face model computes it only when the inputs include labels); "
                    "add the labels to the inputs, or pass loss_fn(output, targets)")
            raise ValueError(
                f"loss_fn is None and the model output ({type(output).__name__}) is neither a tensor nor "
                "has a .loss; pass loss_fn(output, targets)"
            )
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ValueError(f"loss: expected a scalar tensor, got {type(loss).__name__} "
                         f"{tuple(loss.shape) if isinstance(loss, torch.Tensor) else ''}")
    if not loss.requires_grad:
        raise ValueError("loss: does not require grad (no trainable parameter contributes to it)")
    return loss.reshape(())


def _meta_like(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(t.detach(), device="meta")


def _meta_copy(model: nn.Module) -> nn.Module:
    """A structural copy of ``model`` on the meta device without copying weights.

    Parameters and buffers become meta tensors, and so does every other tensor a module holds
    (the weight old-style ``nn.utils.weight_norm`` / ``spectral_norm`` recompute before each
    forward is not a leaf, which deepcopy refuses). An attribute deepcopy cannot copy (a
    threading.Lock, a file or a handle) is shared with the original: the copy only runs the
    analysis pass."""
    memo: dict[int, Any] = {}
    for p in model.parameters():
        memo[id(p)] = nn.Parameter(_meta_like(p), requires_grad=p.requires_grad)
    for b in model.buffers():
        memo[id(b)] = _meta_like(b)

    def meta_tensors(value: Any, depth: int = 0) -> None:
        if isinstance(value, torch.Tensor):
            if id(value) not in memo:
                memo[id(value)] = _meta_like(value)
        elif isinstance(value, (list, tuple, set, frozenset, dict)) and depth < 8:
            for v in (value.values() if isinstance(value, dict) else value):
                meta_tensors(v, depth + 1)

    def copy_or_share(value: Any, depth: int = 0) -> Any:
        if id(value) in memo:
            return memo[id(value)]
        size = len(memo)
        try:
            return copy.deepcopy(value, memo)
        except Exception:  # noqa: BLE001 - uncopyable somewhere inside (a lock, a handle)
            for key in list(memo)[size:]:  # a failed deepcopy leaves half-built copies behind
                del memo[key]
        if type(value) is dict and depth < 8:
            result: Any = {k: copy_or_share(v, depth + 1) for k, v in value.items()}
        elif type(value) in (list, tuple) and depth < 8:
            result = type(value)(copy_or_share(v, depth + 1) for v in value)
        else:
            result = value  # the copy shares it
        memo[id(value)] = result
        return result

    module_dicts = ("_parameters", "_buffers", "_modules")
    for m in model.modules():
        attributes = [v for k, v in vars(m).items() if k not in module_dicts]
        for v in attributes:
            meta_tensors(v)
        for v in attributes:
            if not isinstance(v, (nn.Module, torch.Tensor)):
                copy_or_share(v)
    try:
        return copy.deepcopy(model, memo)
    except Exception as e:  # noqa: BLE001 - whatever the user's modules hold
        raise ValueError(
            f"device: the model ({type(model).__name__}) cannot be copied to meta for analysis "
            f"({type(e).__name__}: {e}); build it on the meta device (`with torch.device('meta'): model = ...`) "
            "and pass that, or profile on cpu") from e


def _model_element_size(params: list[nn.Parameter]) -> int:
    """The element size of the floating-point dtype holding most of ``params``' elements."""
    elements: dict[int, int] = {}
    for p in params:
        if p.is_floating_point():
            elements[p.element_size()] = elements.get(p.element_size(), 0) + p.numel()
    return max(elements, key=lambda size: elements[size]) if elements else 4


def _model_device(model: nn.Module) -> torch.device:
    for t in model.parameters():
        return t.device
    for t in model.buffers():
        return t.device
    return torch.device("cpu")


# ---------------------------------------------------------------------------------------
# the tracer: module stack, node ownership, per-layer accumulation

LayerKey = tuple[str, bool]  # (qualified module name, pseudo)


@dataclass
class _LayerAcc:
    key: LayerKey
    module: nn.Module
    fwd_flops: int = 0
    bwd_flops: int = 0
    io_bytes: int = 0          # leaf: module inputs + outputs; pseudo: own ops' tensors
    ops: set[str] = field(default_factory=set)
    pointwise_only: bool = True
    real_ops: int = 0          # own forward ops that are not views


@dataclass
class _Call:
    key: LayerKey
    parent: int
    start: Any
    end: Any = None


class _Tracer:
    """Installs forward hooks on every module; optionally claims autograd nodes and times calls."""

    def __init__(self, model: nn.Module, clock: _Clock | None, param_storages: set[int]) -> None:
        self.model = model
        self.clock = clock
        self.param_storages = param_storages
        self.names: dict[nn.Module, str] = {}
        self.leaf: dict[nn.Module, bool] = {}
        for name, m in model.named_modules():
            self.names[m] = name
            self.leaf[m] = next(iter(m.children()), None) is None
        self.stack: list[tuple[nn.Module, int]] = []
        self.order: list[LayerKey] = []            # layers by first completion
        self.acc: dict[LayerKey, _LayerAcc] = {}
        self.node_owner: dict[Any, LayerKey] = {}  # autograd node -> layer
        self.param_node_owner: dict[int, LayerKey] = {}  # id(param) -> layer owning its AccumulateGrad
        self.calls: list[_Call] = []
        self.claim = True
        self.timing = False
        self.count = False
        self._handles: list[Any] = []
        self._by_name: dict[str, nn.Module] = {n: m for m, n in self.names.items()}
        self._ordered: set[LayerKey] = set()
        self.bwd_flops_total = 0
        self.meta = False
        self.on_cuda = False
        # (autocast dtype, the model's element size): an analysis under autocast counts that
        # dtype's tensors at the model's size, so bytes stay in the model's dtype
        self.count_as: tuple[torch.dtype, int] | None = None

    def nbytes(self, t: torch.Tensor) -> int:
        if self.count_as is not None and t.dtype == self.count_as[0]:
            return t.numel() * self.count_as[1]
        return _nbytes(t)

    def reset_counts(self) -> None:
        """Forget an analysis pass (one that failed and is run again)."""
        self.order, self.acc, self._ordered = [], {}, set()
        self.param_node_owner = {}
        self.bwd_flops_total = 0
        self.reset_iteration()

    # -- keys --------------------------------------------------------------------------
    def key_of(self, m: nn.Module) -> LayerKey:
        return (self.names[m], not self.leaf[m])

    def current(self) -> LayerKey | None:
        return self.key_of(self.stack[-1][0]) if self.stack else None

    def failing_module(self) -> tuple[str, str] | None:
        if not self.stack:
            return None
        m = self.stack[-1][0]
        return (self.names[m] or "<root>", type(m).__name__)

    def _acc(self, key: LayerKey) -> _LayerAcc:
        a = self.acc.get(key)
        if a is None:
            a = self.acc[key] = _LayerAcc(key, self._by_name[key[0]])
        return a

    # -- autograd node ownership ---------------------------------------------------------
    def _claim_from(self, tensors: list[torch.Tensor], key: LayerKey | None) -> None:
        if key is None:
            return
        stack = [t.grad_fn for t in tensors if t.grad_fn is not None]
        owner = self.node_owner
        while stack:
            n = stack.pop()
            if n is None or n in owner:
                continue
            owner[n] = key
            var = getattr(n, "variable", None)  # AccumulateGrad of a parameter
            if var is not None:
                self.param_node_owner.setdefault(id(var), key)
            for nxt, _ in n.next_functions:
                if nxt is not None and nxt not in owner:
                    stack.append(nxt)

    def reset_iteration(self) -> None:
        self.node_owner = {}
        self.calls = []
        self.stack = []

    # -- hooks -------------------------------------------------------------------------
    def _pre(self, m: nn.Module, args: tuple, kwargs: dict) -> None:
        if self.claim:
            # ops the parent ran before calling this child belong to the parent
            self._claim_from(_tensors((args, kwargs)), self.current())
        idx = -1
        if self.timing:
            self.calls.append(_Call(self.key_of(m), self.stack[-1][1] if self.stack else -1, self.clock.mark()))
            idx = len(self.calls) - 1
        self.stack.append((m, idx))
        if self.count and self.leaf[m]:
            a = self._acc(self.key_of(m))
            a.io_bytes += sum(self.nbytes(t) for t in _tensors((args, kwargs))
                              if _storage_key(t) not in self.param_storages)

    def _post(self, m: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if not self.stack or self.stack[-1][0] is not m:  # pragma: no cover - defensive
            return
        _, idx = self.stack.pop()
        if self.timing and idx >= 0:
            self.calls[idx].end = self.clock.mark()
        key = self.key_of(m)
        outs = _tensors(output)
        if self.claim:
            self._claim_from(outs, key)
        if self.count and self.leaf[m]:
            self._acc(key).io_bytes += sum(self.nbytes(t) for t in outs if _storage_key(t) not in self.param_storages)
        if key not in self.acc:
            self._acc(key)
        if key not in self._ordered:
            self._ordered.add(key)
            self.order.append(key)

    def install(self) -> None:
        for m in self.names:
            self._handles.append(m.register_forward_pre_hook(self._pre, with_kwargs=True))
            self._handles.append(m.register_forward_hook(self._post, with_kwargs=True))

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    # -- op counting (dispatch callback) --------------------------------------------------
    def on_op(self, func: Any, flops: int, args: tuple, kwargs: dict, out: Any) -> None:
        node = torch._C._current_autograd_node()
        if node is not None:  # backward
            key = self.node_owner.get(node)
            if key is not None:
                self._acc(key).bwd_flops += flops
                self.bwd_flops_total += flops
            return
        key = self.current()
        if key is None:
            return  # loss function and other ops outside the model
        a = self._acc(key)
        a.fwd_flops += flops
        name = func._overloadpacket.__name__
        if func.is_view or name in ("detach", "alias", "lift_fresh"):
            return
        a.ops.add(name)
        a.real_ops += 1
        if torch.Tag.pointwise not in func.tags:
            a.pointwise_only = False
        if key[1]:  # pseudo-layer: bytes from its own ops' non-parameter tensors
            ts = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
            a.io_bytes += sum(self.nbytes(t) for t in ts if _storage_key(t) not in self.param_storages)


# ---------------------------------------------------------------------------------------
# the public function


# The largest local batch srift.profile runs: one GPU's batch (MLPerf's NCF, the largest in the
# training data, runs 65,536 samples per GPU); past it the repeated input alone is the problem.
MAX_PROFILE_BATCH = 1 << 24
MIN_BUCKET_MB, MAX_BUCKET_MB = 1e-6, 1e9  # profile.schema.json's bounds of bucket_cap_mb


def _check_args(
    model: Any, batch: Any, precision: str, optimizer: str, warmup: Any, repeats: Any,
    batch_sizes: Any, bucket_cap_mb: Any, first_bucket_mb: Any, allreduce_dtype: Any = None,
) -> None:
    if not isinstance(model, nn.Module):
        raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise ValueError(f"batch: expected (inputs, targets), got {type(batch).__name__}"
                         f"{' of length ' + str(len(batch)) if isinstance(batch, (tuple, list)) else ''}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS}, got {precision!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer: expected one of {OPTIMIZERS}, got {optimizer!r}")
    for label, v, lo in (("warmup", warmup, 0), ("repeats", repeats, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{label}: expected an integer >= {lo}, got {v!r}")
    if batch_sizes is not None:
        if not isinstance(batch_sizes, (list, tuple)) or not batch_sizes:
            raise ValueError(f"batch_sizes: expected a non-empty list of positive integers, got {batch_sizes!r}")
        for i, b in enumerate(batch_sizes):
            if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_PROFILE_BATCH:
                raise ValueError(f"batch_sizes[{i}]: expected an integer in 1..{MAX_PROFILE_BATCH} (a local "
                                 f"batch of one GPU), got {b!r}")
    for label, v in (("bucket_cap_mb", bucket_cap_mb), ("first_bucket_mb", first_bucket_mb)):
        # the Profile schema's bounds: at least a byte, at most 1e9 MiB (one bucket past any model)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not MIN_BUCKET_MB <= v <= MAX_BUCKET_MB:
            raise ValueError(f"{label}: expected a number of MiB in [{MIN_BUCKET_MB:g}, {MAX_BUCKET_MB:g}], got {v!r}")
    check_allreduce_dtype(allreduce_dtype)


def _available_devices() -> list[str]:
    out = ["cpu", "meta"]
    if torch.cuda.is_available():
        out.append("cuda")
        count = torch.cuda.device_count()
        if count > 1:
            out += [f"cuda:{i}" for i in range(count)]
    return out


def check_device(device: Any) -> torch.device:
    """``device`` as a torch.device srift can profile on, else ValueError listing those here.
    Checked up front: torch's own errors (a RuntimeError for an unknown type, an AssertionError
    for CUDA on a CPU-only build) do not say what would work."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        dev = None
    ok = dev is not None and (
        dev.type in ("cpu", "meta")
        # the profiler times CUDA with events; other accelerators would need their own clock
        or (dev.type == "cuda" and torch.cuda.is_available()
            and (dev.index is None or dev.index < torch.cuda.device_count()))
    )
    if not ok:
        raise ValueError(f"device: {str(device)!r} is not available here; available: {', '.join(_available_devices())}")
    return dev


@contextmanager
def _precision(device: torch.device, precision: str) -> Iterator[None]:
    """TF32 switches for the duration of profiling (CUDA only), restored afterwards: PyTorch's
    defaults (cuDNN convolutions and RNNs may use TF32, matmuls not) and TF32 matmuls as well
    for "tf32" (srift/compute.hpp note "fp32 is PyTorch's")."""
    if device.type != "cuda":
        yield
        return
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


@contextmanager
def _composite_kernels(device: torch.device) -> Iterator[None]:
    """For the (untimed) analysis passes: oneDNN/cuDNN fused RNN kernels have no FLOP
    formula, so count them on the composite path, which runs the same ops as meta."""
    backend = {"cpu": torch.backends.mkldnn, "cuda": torch.backends.cudnn}.get(device.type)
    if backend is None:
        yield
        return
    old = backend.enabled
    backend.enabled = False  # not backend.flags(): that also touches TF32 and warns on CPU
    try:
        yield
    finally:
        backend.enabled = old


def _autocast_dtype(device: torch.device) -> torch.dtype:
    return torch.float16 if device.type == "cuda" else torch.bfloat16


def _autocast(device: torch.device, precision: str) -> Any:
    if precision != "amp" or device.type == "meta":
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=_autocast_dtype(device))


def _make_optimizer(name: str, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    # lr=0: the step does all its arithmetic but leaves the user's weights unchanged
    if name == "adam":
        return torch.optim.Adam(params, lr=0.0)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=0.0, weight_decay=0.0)
    return torch.optim.SGD(params, lr=0.0, momentum=0.9)


def _optimizer_state_bytes(name: str, trainable: list[nn.Parameter]) -> int:
    nbytes = sum(_nbytes(p) for p in trainable)
    if name in ("adam", "adamw"):
        return 2 * nbytes + 4 * len(trainable)  # exp_avg, exp_avg_sq, float32 step per param
    return nbytes  # SGD momentum buffer


def _gpu_key(device_name: str) -> str | None:
    try:
        from srift.catalog import Catalog

        keys = Catalog.default().resolve_gpu(device_name)
        return keys[0] if len(keys) == 1 else None
    except Exception:  # catalog missing or name unknown: the profile still works
        return None


def profile(
    model: nn.Module,
    batch: Any,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
    *,
    device: str | torch.device | None = None,
    precision: str = "fp32",
    optimizer: str = "adam",
    warmup: int = 3,
    repeats: int = 10,
    batch_sizes: Sequence[int] | None = None,
    bucket_cap_mb: float = 25,
    first_bucket_mb: float = 1,
    allreduce_dtype: str | None = None,
    find_unused_parameters: bool = False,
    forward_sync_buffers: bool = True,
    name: str | None = None,
    progress: bool = False,
) -> Profile:
    """Profile one training iteration of ``model`` on ``batch``; see the module docstring.

    ``device``: where to run (default: the model's device). ``"meta"`` (or a model already on
    meta) gives structure, FLOPs, bytes and buckets without real compute; timings are None and
    bucket ``ready_fraction`` comes from backward-FLOP shares. ``batch_sizes``: local batches to
    time (default: the batch and half of it; the half is dropped, with a warning, when the
    model cannot train at it). ``bucket_cap_mb``/``first_bucket_mb`` mirror DDP's
    defaults (``DistributedDataParallel(bucket_cap_mb=None)``); for ``bucket_cap_mb=X`` passed
    explicitly to DDP use ``first_bucket_mb=X``. ``allreduce_dtype`` ("fp16", "bf16", "fp32"):
    the dtype a DDP communication hook casts each bucket to before its allreduce
    (``fp16_compress_hook`` / ``bf16_compress_hook``); None sends the gradients as they are
    (Profile note "allreduce dtype"). ``find_unused_parameters``: as passed to DDP, which a
    model needs when its forward leaves parameters unused (DDP's default fails on them at the
    second iteration; srift warns, naming them); DDP then keeps its buckets in registration
    order. ``forward_sync_buffers``: as passed to DDP (``broadcast_buffers`` before torch
    2.13; both default to True): rank 0 then broadcasts the model's buffers before every
    iteration's forward, which predictions add to the iteration (srift.buckets
    :func:`~srift.buckets.buffer_broadcasts`). ``progress`` shows a progress bar (tqdm, on
    stderr) over the timed iterations.
    """
    for label, flag in (("find_unused_parameters", find_unused_parameters),
                        ("forward_sync_buffers", forward_sync_buffers)):
        if not isinstance(flag, bool):
            raise ValueError(f"{label}: expected True or False, got {flag!r}")
    _check_args(model, batch, precision, optimizer, warmup, repeats, batch_sizes, bucket_cap_mb, first_bucket_mb,
                allreduce_dtype)
    if name is not None and (not isinstance(name, str) or not name.strip()):
        # checked here: the profile's schema requires a string, and saving comes after the run
        raise ValueError(f"name: expected a non-empty string (or None for the model's class name), got {name!r}")
    scripted = next(((n, m) for n, m in model.named_modules() if isinstance(m, torch.jit.RecursiveScriptModule)),
                    None)
    if scripted is not None:
        # PyTorch refuses hooks on scripted modules (a RuntimeError from register_forward_pre_hook)
        what = f"submodule '{scripted[0]}' is a TorchScript module" if scripted[0] else "it is a TorchScript module"
        raise ValueError(
            f"model: {what} (torch.jit.script), which takes no forward hooks, so srift cannot profile it; "
            "profile the eager nn.Module you pass to torch.jit.script (a traced module, torch.jit.trace, works)")
    model_dev = _model_device(model)
    dev = check_device(device) if device is not None else model_dev
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    is_meta = dev.type == "meta"
    if model_dev.type == "meta" and not is_meta:
        raise ValueError(f"device: the model is on meta (no weights) and cannot run on {dev}; use device='meta'")

    moved = False
    if is_meta and model_dev.type != "meta":
        if isinstance(model, torch.jit.ScriptModule):
            # deepcopy makes a traced module a scripted one, its weights copied in TorchScript
            raise ValueError("device: a traced TorchScript module (torch.jit.trace) cannot be copied to meta; "
                             "profile it on cpu, or profile the eager nn.Module on meta")
        work = _meta_copy(model)
    else:
        work = model
        if model_dev != dev:
            work.to(dev)
            moved = True

    inputs, targets = _map_tensors(tuple(batch), lambda t: t.to(dev))
    stranded = next((t for t in _tensors(inputs) + _tensors(targets) if t.device != dev), None)
    if stranded is not None:
        raise ValueError(f"batch: cannot move a tensor of shape {tuple(stranded.shape)} on {stranded.device} to {dev}: "
                         "it is inside an object srift cannot rebuild (it moves tensors in tuples, lists, dicts, "
                         f"dataclasses and pytree-registered types); pass the batch as one of those, on {dev}")
    full = _batch_size(inputs, targets)
    if full > MAX_PROFILE_BATCH:
        raise ValueError(f"batch: dimension 0 is {full}, more than one GPU's local batch srift profiles "
                         f"({MAX_PROFILE_BATCH}); profile a smaller batch (the per-sample costs scale)")
    if batch_sizes is None:
        sizes = [full] + ([full // 2] if full >= 2 else [])
    else:
        sizes = list(dict.fromkeys(int(b) for b in batch_sizes))

    was_training = {m: m.training for m in work.modules()}
    buffers_backup = [(b, b.detach().clone()) for b in work.buffers()] if not is_meta else []
    grads_backup = [(p, p.grad) for p in work.parameters()]
    try:
        with _precision(dev, precision):
            result = _profile_impl(
                work, inputs, targets, loss_fn, dev, is_meta, full, sizes, precision, optimizer,
                warmup, repeats, bucket_cap_mb, first_bucket_mb,
                name or type(model).__name__, progress, derived_sizes=batch_sizes is None,
                find_unused_parameters=find_unused_parameters,
            )
        result.allreduce_dtype = allreduce_dtype
        result.forward_sync_buffers = forward_sync_buffers
        return result
    finally:
        for m, t in was_training.items():
            m.training = t
        with torch.no_grad():
            for b, saved in buffers_backup:
                b.copy_(saved)
        for p, g in grads_backup:
            p.grad = g
        if moved:
            work.to(model_dev)


def _profile_impl(
    model: nn.Module, inputs: Any, targets: Any, loss_fn: Any, dev: torch.device, is_meta: bool,
    full: int, sizes: list[int], precision: str, optimizer: str, warmup: int, repeats: int,
    bucket_cap_mb: float, first_bucket_mb: float, model_name: str, progress: bool = False,
    derived_sizes: bool = False, find_unused_parameters: bool = False,
) -> Profile:
    """derived_sizes: `sizes` beyond `full` were chosen here, not by the caller (see below)."""
    model.train()
    params = list(model.parameters())  # deduplicated (tied weights once)
    trainable = [p for p in params if p.requires_grad]
    if not trainable:
        raise ValueError("model: has no parameter that requires grad; nothing to train")
    param_storages = {_storage_key(p) for p in params} | {_storage_key(b) for b in model.buffers()}
    ddp_params = ddp_parameters(model)
    sparse = [p.name for p in ddp_params if p.sparse_grad]
    if sparse and optimizer != "sgd":
        raise ValueError(f"optimizer: {optimizer!r} cannot train the sparse gradients of {', '.join(sparse)} "
                         "(an embedding built with sparse=True); profile with optimizer='sgd' (--optimizer sgd; "
                         "torch.optim.SparseAdam is not modelled)")
    if sparse:
        # ProcessGroupNCCL::allreduce_sparse throws ("NCCL does not support all_reduce with sparse
        # tensors"): DDP on the GPU clusters srift predicts fails at the first backward
        warnings.warn(
            f"{', '.join(sparse)}: sparse gradients (an embedding built with sparse=True) cannot be all-reduced by "
            "DDP on NCCL, the backend of every GPU cluster srift predicts (torch raises 'NCCL does not support "
            "all_reduce with sparse tensors' at the first backward); predictions send each such gradient as a dense "
            "bucket of the whole table, what the model sends when built with sparse=False", stacklevel=3)
    ddp_index = {id(p.tensor): p.index for p in ddp_params}
    clock = None if is_meta else _Clock(dev)
    autocast = lambda: _autocast(dev, precision)  # noqa: E731

    tracer = _Tracer(model, clock, param_storages)
    tracer.meta = is_meta
    tracer.on_cuda = dev.type == "cuda"  # SDPA is rerouted to the fused kernel on cpu and meta only
    tracer.install()
    try:
        # ---- 1. analysis pass at the example batch: FLOPs, bytes, nodes, ready order -----
        ready_order: list[int] = []
        ready_bwd_flops: dict[int, int] = {}

        def on_ready(p: torch.Tensor) -> None:
            i = ddp_index.get(id(p))
            if i is not None and i not in ready_bwd_flops:
                ready_order.append(i)
                ready_bwd_flops[i] = tracer.bwd_flops_total

        ready_handles = [p.register_post_accumulate_grad_hook(on_ready) for p in trainable]
        saved: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            k = _storage_key(t)
            if k not in param_storages and k not in saved:
                try:
                    saved[k] = t.untyped_storage().nbytes()
                except Exception:
                    saved[k] = _nbytes(t)
                if tracer.count_as is not None and t.dtype == tracer.count_as[0]:
                    saved[k] = saved[k] // t.element_size() * tracer.count_as[1]
            return t

        def analyse(autocast_or_not: Callable[[], Any]) -> int:
            """One forward and backward at the example batch; the saved-tensor bytes."""
            tracer.reset_counts()
            ready_order.clear()
            ready_bwd_flops.clear()
            saved.clear()
            for p in params:
                p.grad = None
            with OpCounter(tracer.on_op), _composite_kernels(dev):
                with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                    out = _forward(model, inputs, tracer, autocast_or_not)
                    loss = _loss(out, targets, loss_fn)
                try:
                    _backward(loss, tracer)
                except Exception as e:
                    raise ValueError(f"backward failed: {type(e).__name__}: {e}") from e
            return sum(saved.values())

        analysis_autocast: Callable[[], Any] = nullcontext
        try:
            tracer.count = True
            # The analysis pass runs without autocast on every device, as it does on meta: a
            # profile's bytes and activations are in the model's own dtype, and the core
            # halves them for AMP (compute.cpp activation_byte_scale, Engine._workload), which
            # is also how the learned models saw their training rows. Under autocast a cpu or
            # cuda AMP profile was halved twice (2x the local batch said to fit).
            try:
                saved_full = analyse(nullcontext)
            except ValueError:
                if precision != "amp" or is_meta:  # meta has no autocast (nor checks dtypes)
                    raise
                # A model that trains only under autocast (a half-precision buffer meeting FP32
                # activations): analyse it under autocast, its autocast-dtype tensors counted at
                # the model's element size, so the bytes are still the model dtype's.
                analysis_autocast = autocast
                tracer.count_as = (_autocast_dtype(dev), _model_element_size(trainable))
                saved_full = analyse(analysis_autocast)
        finally:
            tracer.count = False
            for h in ready_handles:
                h.remove()
        for p in params:
            p.grad = None

        # activation memory per sample: slope of saved-tensor bytes between two batches
        activation = saved_full / full
        other = next((b for b in sizes if b != full), None)
        if other is not None:
            # resized outside the try below: a batch srift cannot resize is an error, not a
            # batch size the model cannot train at
            other_inputs = _resize_batch(inputs, full, other, "inputs")
            other_targets = _resize_batch(targets, full, other, "targets")
            saved.clear()
            tracer.claim = False
            tracer.reset_iteration()
            try:
                with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), _composite_kernels(dev):
                    out = _forward(model, other_inputs, tracer, analysis_autocast)
                    loss = _loss(out, other_targets, loss_fn)
                del out, loss
                activation = max(0.0, (saved_full - sum(saved.values())) / (full - other))
            except ValueError as e:
                # Half of a batch of 2 or 3 is a batch of 1, which BatchNorm refuses to train on
                # wherever a feature map is 1x1 (SSD300's last blocks). A batch the caller did
                # not ask for is dropped, not an error: one timed batch, activations per sample
                # from the full batch alone.
                if not derived_sizes:
                    raise
                warnings.warn(f"batch_sizes: the model does not train at local batch {other} ({e}); "
                              f"profiling at batch {full} only", stacklevel=3)
                sizes[:] = [b for b in sizes if b != other]
            finally:
                tracer.claim = True
            del other_inputs, other_targets
        tracer.count_as = None

        # ---- 2. timings ---------------------------------------------------------------
        timings = None
        layer_fwd: dict[LayerKey, float] = {}
        layer_bwd: dict[LayerKey, float] = {}
        ready_time_frac: dict[int, float] = {}
        if not is_meta:
            bar = _progress_bar(len(sizes) * (warmup + repeats) + repeats, model_name, progress)
            try:
                tracer.claim = False
                timings = _time_batches(model, inputs, targets, loss_fn, full, sizes, optimizer, trainable,
                                        tracer, clock, dev, warmup, repeats, autocast, bar)
                tracer.claim = True
                layer_fwd, layer_bwd, ready_time_frac = _time_layers(
                    model, inputs, targets, loss_fn, optimizer, trainable, tracer, clock, repeats, ddp_index,
                    autocast, bar)
            finally:
                bar.close()
    finally:
        tracer.remove()
        tracer.reset_iteration()

    # ---- 3. assemble layers ---------------------------------------------------------------
    keys = [k for k in tracer.order if not k[1] or tracer.acc[k].real_ops > 0 or tracer.acc[k].bwd_flops > 0]
    index_of = {k: i for i, k in enumerate(keys)}
    param_bytes_by_module: dict[str, int] = {}
    for pname, p in model.named_parameters():
        mod = _parameter_owner(model, pname)
        param_bytes_by_module[mod] = param_bytes_by_module.get(mod, 0) + _nbytes(p)
    layers: list[LayerProfile] = []
    for k in keys:
        a = tracer.acc[k]
        mod_name, pseudo = k
        kind = kind_from_ops(a.ops, a.pointwise_only) if pseudo else layer_kind(a.module, a.ops, a.pointwise_only)
        layers.append(
            LayerProfile(
                name=mod_name if mod_name else "<root>",
                type=type(a.module).__name__,
                kind=kind,
                forward_flops=a.fwd_flops / full,
                backward_flops=a.bwd_flops / full,
                forward_bytes=a.io_bytes / full,
                param_bytes=param_bytes_by_module.get(mod_name, 0),
                forward_s=layer_fwd.get(k) if not is_meta else None,
                backward_s=layer_bwd.get(k) if not is_meta else None,
                pseudo=pseudo,
            )
        )

    # ---- 4. buckets ------------------------------------------------------------------------
    became_ready = set(ready_order)
    unused = [p.name for p in ddp_params if p.index not in became_ready]
    if unused and not find_unused_parameters:
        shown = ", ".join(unused[:5]) + (f" and {len(unused) - 5} more" if len(unused) > 5 else "")
        warnings.warn(f"{len(unused)} parameter(s) got no gradient in the profiled backward ({shown}): "
                      "DDP with its default find_unused_parameters=False fails on them at the second "
                      "iteration; build DDP with find_unused_parameters=True and profile with "
                      "find_unused_parameters=True (--find-unused-parameters), or remove them", stacklevel=3)
    buckets = ddp_buckets(model, bucket_cap_mb, first_bucket_mb, ready_order=ready_order,
                          find_unused_parameters=find_unused_parameters)
    total_bwd = tracer.bwd_flops_total
    bucket_profiles: list[BucketProfile] = []
    running = running_flops = 0.0
    for b in buckets:
        last = b.param_indices[-1]
        p = ddp_params[last]
        key = tracer.param_node_owner.get(id(p.tensor))
        if key is None or key not in index_of:
            mod = p.name.rpartition(".")[0]
            key = next((k for k in keys if k[0] == mod), None)
        # A parameter that got no gradient: with find_unused_parameters DDP's reducer marks it
        # ready at the backward's first hook (reducer.cpp autograd_hook), so it holds no
        # bucket back; without it DDP fails, and srift has warned.
        unused_at = 0.0 if find_unused_parameters else 1.0
        flops_frac = None
        if total_bwd > 0:  # buckets are ready in order
            flops = max(ready_bwd_flops.get(i, unused_at * total_bwd) for i in b.param_indices) / total_bwd
            running_flops = flops_frac = max(running_flops, min(1.0, max(0.0, flops)))
        if ready_time_frac:
            frac = max(ready_time_frac.get(i, unused_at) for i in b.param_indices)
        elif flops_frac is not None:
            frac = flops_frac
        else:
            frac = (b.index + 1) / len(buckets)
        running = max(running, min(1.0, max(0.0, frac)))
        # No layer owns the bucket's last parameter (one used outside every module's forward):
        # layer 0, whose backward runs last, so the bucket is ready only at the end of the backward.
        bucket_profiles.append(
            BucketProfile(index=b.index, bytes=b.bytes, param_names=b.param_names,
                          last_layer=index_of[key] if key is not None else 0,
                          ready_fraction=running, ready_flops_fraction=flops_frac, numel=b.numel)
        )

    device_name = "meta" if is_meta else ("cpu" if dev.type == "cpu" else
                                         (torch.cuda.get_device_name(dev) if dev.type == "cuda" else str(dev)))
    return Profile(
        model=model_name,
        device=device_name,
        device_gpu=_gpu_key(device_name) if dev.type == "cuda" else None,
        precision=precision,
        example_batch_size=full,
        param_count=sum(p.numel() for p in params),
        param_bytes=sum(_nbytes(p) for p in params),
        trainable_param_bytes=sum(_nbytes(p) for p in trainable),
        buffer_bytes=sum(_nbytes(b) for b in model.buffers()),
        buffer_broadcast_bytes=buffer_broadcasts(model),
        optimizer=optimizer,
        optimizer_state_bytes=_optimizer_state_bytes(optimizer, trainable),
        activation_bytes_per_sample=float(activation),
        bucket_cap_mb=bucket_cap_mb,
        first_bucket_mb=first_bucket_mb,
        find_unused_parameters=find_unused_parameters,
        layers=layers,
        buckets=bucket_profiles,
        timings=timings,
        # the release whose official wheels a plan must run by default (srift.torch_support)
        torch_version=str(torch.__version__),
        torch_cuda=torch.version.cuda,
    )


def _parameter_owner(model: nn.Module, param_name: str) -> str:
    """The module whose layer reads parameter ``param_name``: its own module, except that a
    parametrized weight (``l1.parametrizations.weight.original``, torch.nn.utils.parametrize)
    is read by the parametrized module (``l1``), not by the container that stores it."""
    from torch.nn.utils import parametrize

    parts = param_name.split(".")[:-1]
    while "parametrizations" in parts:
        at = len(parts) - 1 - parts[::-1].index("parametrizations")
        owner = ".".join(parts[:at])
        try:
            if parametrize.is_parametrized(model.get_submodule(owner)):
                return owner
        except AttributeError:
            pass
        parts = parts[:at]
    return param_name.rpartition(".")[0]


def _forward(model: nn.Module, inputs: Any, tracer: _Tracer, autocast: Callable[[], Any]) -> Any:
    """Run the forward; a failure names the innermost module that was running."""
    tracer.stack = []
    try:
        with autocast(), (FusedAttention() if not tracer.on_cuda else nullcontext()):
            return _call(model, inputs)
    except Exception as e:
        where = tracer.failing_module()
        tracer.stack = []
        hint = ""
        if tracer.meta and "meta" in str(e).lower():
            # e.g. Tensor.item() or a data-dependent shape (Hugging Face BERT's and wav2vec2's masks)
            hint = ("; the model reads tensor values, which meta tensors do not have, so it cannot be "
                    "analysed on meta: profile it on cpu (a smaller configuration or sequence if it is too large: "
                    "FLOPs and bytes per sample scale)")
        if where is None:
            raise ValueError(f"forward failed before entering any module: {type(e).__name__}: {e}{hint}") from e
        raise ValueError(f"forward failed in module '{where[0]}' ({where[1]}): {type(e).__name__}: {e}{hint}") from e


def _backward(loss: torch.Tensor, tracer: _Tracer) -> None:
    """The backward, with attention routed as in the forward: activation checkpointing
    (torch.utils.checkpoint, Hugging Face's gradient_checkpointing_enable) re-runs the forward
    inside the backward, and without FusedAttention there its SDPA took the math path on meta
    (and on cpu with dropout): a 4-bmm backward where a GPU's fused kernel runs 5, the
    recompute's attention backward counted 20% short (a TorchFunctionMode sees no call inside
    a backward: srift.flops.fused_attention_in_backward)."""
    with fused_attention_in_backward() if not tracer.on_cuda else nullcontext():
        loss.backward()


def _progress_bar(total: int, name: str, enabled: bool) -> Any:
    """A tqdm bar over timed iterations (disabled: a no-op with the same methods)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"profiling {name}", unit="it", disable=not enabled, leave=False)


def _time_batches(
    model: nn.Module, inputs: Any, targets: Any, loss_fn: Any, full: int, sizes: list[int], optimizer: str,
    trainable: list[nn.Parameter], tracer: _Tracer, clock: _Clock, dev: torch.device, warmup: int,
    repeats: int, autocast: Callable[[], Any], bar: Any,
) -> Timings:
    """Whole-iteration timings per batch size (forward hooks only track the stack here)."""
    opt = _make_optimizer(optimizer, trainable)
    fwd_med, bwd_med, it_med = [], [], []
    fwd_p10, fwd_p90, bwd_p10, bwd_p90, it_p10, it_p90 = [], [], [], [], [], []
    opt_all: list[float] = []
    peaks: list[int | None] = []
    for b in sizes:
        x = _resize_batch(inputs, full, b)
        y = _resize_batch(targets, full, b)
        for _ in range(warmup):
            _iteration(model, x, y, loss_fn, opt, tracer, clock, autocast)
            bar.update(1)
        clock.sync()
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        marks = []
        for _ in range(repeats):
            marks.append(_iteration(model, x, y, loss_fn, opt, tracer, clock, autocast))
            bar.update(1)
        clock.sync()
        peaks.append(int(torch.cuda.max_memory_allocated(dev)) if dev.type == "cuda" else None)
        f = [clock.elapsed(m[0], m[1]) for m in marks]
        bw = [clock.elapsed(m[1], m[2]) for m in marks]
        o = [clock.elapsed(m[2], m[3]) for m in marks]
        it = [clock.elapsed(m[0], m[3]) for m in marks]
        opt_all += o
        fwd_med.append(_median(f)); fwd_p10.append(_pct(f, 10)); fwd_p90.append(_pct(f, 90))
        bwd_med.append(_median(bw)); bwd_p10.append(_pct(bw, 10)); bwd_p90.append(_pct(bw, 90))
        it_med.append(_median(it)); it_p10.append(_pct(it, 10)); it_p90.append(_pct(it, 90))
    return Timings(
        batch_sizes=list(sizes), forward_s=fwd_med, backward_s=bwd_med, optimizer_s=_median(opt_all),
        iteration_s=it_med, forward_p10=fwd_p10, forward_p90=fwd_p90, backward_p10=bwd_p10,
        backward_p90=bwd_p90, repeats=repeats, warmup=warmup, iteration_p10=it_p10, iteration_p90=it_p90,
        optimizer_p10=_pct(opt_all, 10), optimizer_p90=_pct(opt_all, 90), peak_memory_bytes=peaks,
    )


def _iteration(model: nn.Module, x: Any, y: Any, loss_fn: Any, opt: torch.optim.Optimizer, tracer: _Tracer,
               clock: _Clock, autocast: Callable[[], Any]) -> tuple[Any, Any, Any, Any]:
    tracer.reset_iteration()
    t0 = clock.mark()
    out = _forward(model, x, tracer, autocast)
    loss = _loss(out, y, loss_fn)
    t1 = clock.mark()
    _backward(loss, tracer)
    t2 = clock.mark()
    opt.step()
    t3 = clock.mark()
    opt.zero_grad(set_to_none=True)
    return t0, t1, t2, t3


def _time_layers(
    model: nn.Module, inputs: Any, targets: Any, loss_fn: Any, optimizer: str, trainable: list[nn.Parameter],
    tracer: _Tracer, clock: _Clock, repeats: int, ddp_index: dict[int, int], autocast: Callable[[], Any],
    bar: Any,
) -> tuple[dict[LayerKey, float], dict[LayerKey, float], dict[int, float]]:
    """Per-layer forward/backward medians and per-parameter gradient-ready fractions."""
    fwd_runs: list[dict[LayerKey, float]] = []
    bwd_runs: list[dict[LayerKey, float]] = []
    ready_runs: list[dict[int, float]] = []
    ready_marks: dict[int, Any] = {}

    def on_ready(p: torch.Tensor) -> None:
        i = ddp_index.get(id(p))
        if i is not None and i not in ready_marks:
            ready_marks[i] = clock.mark()

    handles = [p.register_post_accumulate_grad_hook(on_ready) for p in trainable]
    try:
        for _ in range(repeats):
            tracer.reset_iteration()
            tracer.timing = True
            try:
                out = _forward(model, inputs, tracer, autocast)
                loss = _loss(out, targets, loss_fn)
            finally:
                tracer.timing = False
            node_marks: dict[Any, list[Any]] = {}
            node_handles = []
            for node, key in tracer.node_owner.items():
                def pre(*_: Any, node: Any = node) -> None:
                    node_marks.setdefault(node, [None, None])[0] = clock.mark()

                def post(*_: Any, node: Any = node) -> None:
                    node_marks.setdefault(node, [None, None])[1] = clock.mark()

                node_handles.append(node.register_prehook(pre))
                node_handles.append(node.register_hook(post))
            ready_marks.clear()
            b0 = clock.mark()
            _backward(loss, tracer)
            b1 = clock.mark()
            for h in node_handles:
                h.remove()
            for p in trainable:
                p.grad = None
            clock.sync()
            bar.update(1)

            fwd: dict[LayerKey, float] = {}
            child_sum: dict[int, float] = {}
            durs = [clock.elapsed(c.start, c.end) if c.end is not None else 0.0 for c in tracer.calls]
            for c, d in zip(tracer.calls, durs):
                if c.parent >= 0:
                    child_sum[c.parent] = child_sum.get(c.parent, 0.0) + d
            for i, (c, d) in enumerate(zip(tracer.calls, durs)):
                own = max(0.0, d - child_sum.get(i, 0.0)) if c.key[1] else d
                fwd[c.key] = fwd.get(c.key, 0.0) + own
            bwd: dict[LayerKey, float] = {}
            for node, (s, e) in node_marks.items():
                key = tracer.node_owner.get(node)
                if key is not None and s is not None and e is not None:
                    bwd[key] = bwd.get(key, 0.0) + clock.elapsed(s, e)
            total = clock.elapsed(b0, b1)
            ready = {i: (clock.elapsed(b0, m) / total if total > 0 else 1.0) for i, m in ready_marks.items()}
            fwd_runs.append(fwd)
            bwd_runs.append(bwd)
            ready_runs.append(ready)
            del out, loss
    finally:
        for h in handles:
            h.remove()
        tracer.reset_iteration()

    def med(runs: list[dict[Any, float]]) -> dict[Any, float]:
        keys = set().union(*runs) if runs else set()
        return {k: _median([r.get(k, 0.0) for r in runs]) for k in keys}

    ready = {k: min(1.0, max(0.0, v)) for k, v in med(ready_runs).items()}
    return med(fwd_runs), med(bwd_runs), ready
