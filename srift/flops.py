"""FLOP counting helpers on top of ``torch.utils.flop_counter``.

Convention: **1 multiply-accumulate = 2 FLOPs** (``FlopCounterMode``'s convention), and only
matmul, convolution and attention ops are counted (norms, activations and adds are
bandwidth-bound and described by bytes instead). ResNet-50 at 224x224 is therefore
~4.1 GMACs = ~8.2 GFLOPs per image forward.

Additions to torch's formula table: on CPU ``scaled_dot_product_attention`` runs
``aten._scaled_dot_product_flash_attention_for_cpu`` (and its backward), which
``FlopCounterMode`` counts as 0; we register the same formulas torch uses for the CUDA
flash kernels, so attention FLOPs agree on cpu, cuda and meta (meta runs the math path,
which gives the same forward count). Attention backward follows torch's fused-kernel
formulas: 5 bmm-equivalents including the recompute of the score matrix (2.5x forward).
Because the math path on ``meta`` (and on cpu with dropout) has no recompute (4 bmms) and
stores the score matrix, :class:`FusedAttention` routes ``F.scaled_dot_product_attention`` on
cpu and meta tensors to the fused CPU kernel (its meta implementation on meta), grouped-query
attention (``enable_gqa=True``) included, so cpu, cuda (flash/efficient) and meta counts
agree. Causal masking is not discounted, as in torch.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

__all__ = [
    "FLOP_CONVENTION",
    "flop_formulas",
    "OpCounter",
    "kind_from_ops",
    "ATTENTION_OPS",
    "FusedAttention",
    "fused_attention_in_backward",
]

FLOP_CONVENTION = "2 FLOPs per multiply-accumulate (torch.utils.flop_counter convention)"

_aten = torch.ops.aten


def _cpu_sdpa_flop(query: Any, key: Any, value: Any, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    return sdpa_flop_count(tuple(query.shape), tuple(key.shape), tuple(value.shape))


def _cpu_sdpa_backward_flop(
    grad_out: Any, query: Any, key: Any, value: Any, *args: Any, out_val: Any = None, **kwargs: Any
) -> int:
    return sdpa_backward_flop_count(
        tuple(grad_out.shape), tuple(query.shape), tuple(key.shape), tuple(value.shape)
    )


def flop_formulas() -> dict[Any, Callable[..., int]]:
    """torch's FLOP formula table plus the CPU attention kernels it lacks."""
    table: dict[Any, Callable[..., int]] = dict(flop_registry)
    extra = {
        "_scaled_dot_product_flash_attention_for_cpu": _cpu_sdpa_flop,
        "_scaled_dot_product_flash_attention_for_cpu_backward": _cpu_sdpa_backward_flop,
    }
    for name, fn in extra.items():
        packet = getattr(_aten, name, None)
        if packet is not None and packet not in table:
            table[packet] = fn
    return table


# Ops whose presence marks a layer as attention (fused kernels and their backward).
ATTENTION_OPS = frozenset(
    {
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_flash_attention_forward",
        "_efficient_attention_forward",
        "_native_multi_head_attention",
    }
)

_SKIP = {
    _aten.sym_is_contiguous.default if hasattr(_aten, "sym_is_contiguous") else None,
    _aten.is_contiguous.default,
    _aten.is_contiguous.memory_format,
    _aten.is_strides_like_format.default,
    _aten.is_non_overlapping_and_dense.default,
    _aten.size.default,
    _aten.sym_size.default,
    _aten.stride.default,
    _aten.sym_stride.default,
    _aten.storage_offset.default,
    _aten.sym_storage_offset.default,
    _aten.numel.default,
    _aten.sym_numel.default,
    _aten.dim.default,
    torch.ops.prim.layout.default,
}


class OpCounter(TorchDispatchMode):
    """Dispatch mode that reports every aten op with its FLOPs to ``callback``.

    ``callback(func, flops, args, kwargs, out)``; the counting mirrors ``FlopCounterMode``
    (ops without a formula are decomposed when they can be, so their matmuls are seen).
    """

    def __init__(self, callback: Callable[[Any, int, tuple, dict, Any], None]) -> None:
        super().__init__()
        self.callback = callback
        self.formulas = flop_formulas()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func in _SKIP:
            return NotImplemented
        packet = func._overloadpacket
        if packet not in self.formulas and func is not torch.ops.prim.device.default:
            with self:
                r = func.decompose(*args, **kwargs)
                if r is not NotImplemented:
                    return r
        out = func(*args, **kwargs)
        formula = self.formulas.get(packet)
        flops = int(formula(*args, **kwargs, out_val=out)) if formula is not None else 0
        self.callback(func, flops, args, kwargs, out)
        return out


class FusedAttention(TorchFunctionMode):
    """Run ``F.scaled_dot_product_attention`` on cpu and meta tensors through the fused kernel a
    GPU runs, so a profile counts the attention a CUDA device would.

    On meta, SDPA otherwise takes the math path, whose backward lacks the fused kernels'
    recompute (FLOPs) and which stores the score matrix (bytes, activation memory). On cpu
    it takes the same math path whenever ``dropout_p > 0`` (the CPU flash kernel has no
    dropout), the default of nn.TransformerEncoderLayer and of GPT-2's and BERT's configs,
    where CUDA's flash and memory-efficient kernels apply dropout inside the kernel: such a
    profile of a GPT-2 stored 2.9x the activations of the meta profile. The fused call runs
    without dropout (the kernel a GPU runs draws its mask in-kernel and stores none): FLOPs,
    bytes and activations are the GPU kernel's; a cpu profile's timings are of the CPU kernel
    without the dropout mask. nn.MultiheadAttention without attention weights
    (``need_weights=False``, as nn.TransformerEncoderLayer calls it) reaches SDPA through
    ``F.multi_head_attention_forward``, a torch function of its own; inside it this mode is
    off, so its SDPA is routed for the duration of that call (thread-safe: only the threads
    inside this mode are rerouted). On cuda nothing is rerouted.
    """

    def _fused(self, func: Any, args: tuple, kwargs: dict) -> Any:
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
        a = dict(zip(names, args))
        a.update(kwargs)
        q, k, v = a.get("query"), a.get("key"), a.get("value")
        if (
            isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)
            and q.device.type in ("meta", "cpu") and q.dim() == k.dim() == v.dim() == 4
            and k.shape[1] == v.shape[1] and (
                q.shape[1] == k.shape[1]
                # grouped-query attention: the fused kernel (cpu and meta) takes fewer K/V heads
                or (a.get("enable_gqa", False) and k.shape[1] > 0 and q.shape[1] % k.shape[1] == 0))
            and q.dtype == k.dtype == v.dtype
        ):
            mask = a.get("attn_mask")
            if mask is not None and mask.dtype == torch.bool:
                # the fused CPU kernel takes an additive float mask
                mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, float("-inf"))
            try:
                # inside __torch_function__ this mode is already off, so this does not recurse
                return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                    q, k, v, 0.0, bool(a.get("is_causal", False)), attn_mask=mask, scale=a.get("scale"),
                )[0]
            except (RuntimeError, TypeError, ValueError):
                pass  # a shape or mask the fused kernel refuses: the call as written
        return func(*args, **kwargs)

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention or func is _REAL_SDPA:
            return self._fused(_REAL_SDPA, args, kwargs)
        if func is torch.nn.functional.multi_head_attention_forward:
            with _mha_reroute(self):
                return func(*args, **kwargs)
        return func(*args, **kwargs)


# F.multi_head_attention_forward calls the module global `scaled_dot_product_attention`; inside
# it a TorchFunctionMode is off, so the global is swapped for a router while any thread profiles.
# The router reroutes only in threads that are inside FusedAttention (a thread-local stack), and
# one lock and count install and remove it: two threads swapping the global by hand left it
# swapped for good.
_REAL_SDPA = torch.nn.functional.scaled_dot_product_attention
_reroute_lock = threading.Lock()
_reroute_users = 0
_reroute_local = threading.local()


def _routed_sdpa(*args: Any, **kwargs: Any) -> Any:
    stack = getattr(_reroute_local, "modes", None)
    if stack:
        return stack[-1]._fused(_REAL_SDPA, args, kwargs)
    return _REAL_SDPA(*args, **kwargs)


@contextlib.contextmanager
def _mha_reroute(mode: FusedAttention) -> Iterator[None]:
    global _reroute_users
    stack = getattr(_reroute_local, "modes", None)
    if stack is None:
        stack = _reroute_local.modes = []
    with _reroute_lock:
        if _reroute_users == 0:
            torch.nn.functional.scaled_dot_product_attention = _routed_sdpa
        _reroute_users += 1
    stack.append(mode)
    try:
        yield
    finally:
        stack.pop()
        with _reroute_lock:
            _reroute_users -= 1
            if _reroute_users == 0:
                torch.nn.functional.scaled_dot_product_attention = _REAL_SDPA


@contextlib.contextmanager
def fused_attention_in_backward() -> Iterator[None]:
    """Route ``F.scaled_dot_product_attention`` to the fused kernel inside a backward, as
    :class:`FusedAttention` does in the forward. Activation checkpointing
    (``torch.utils.checkpoint``, reentrant or not; Hugging Face's ``gradient_checkpointing_enable``)
    re-runs the forward inside the backward, where a TorchFunctionMode entered around
    ``loss.backward()`` sees no call; the recompute runs in the calling thread on cpu and meta, so
    the module global is swapped for the thread-local router instead (code that bound the
    function under another name at import is not rerouted)."""
    with _mha_reroute(FusedAttention()):
        yield


_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "matmul", "addbmm", "_scaled_mm", "linear", "einsum"}
_CONV = {"convolution", "_convolution", "conv2d", "conv1d", "conv3d", "cudnn_convolution", "mkldnn_convolution"}
_EMBED = {"embedding", "_embedding_bag", "embedding_bag"}
_RECURRENT = {"lstm", "gru", "rnn_tanh", "rnn_relu", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell", "gru_cell"}


def kind_from_ops(op_names: set[str], pointwise_only: bool) -> str:
    """Classify a group of forward aten ops (names without overload) into a layer kind."""
    if not op_names:
        return "other"
    if op_names & ATTENTION_OPS or ("bmm" in op_names and op_names & {"_softmax", "_safe_softmax", "softmax"}):
        return "attention"
    if op_names & _CONV:
        return "conv"
    if op_names & _RECURRENT:
        return "recurrent"
    if op_names & _MATMUL:
        return "matmul"
    if op_names & _EMBED:
        return "embedding"
    if any("norm" in n for n in op_names):
        return "norm"
    if any("pool" in n for n in op_names):
        return "pool"
    if pointwise_only:
        return "elementwise"
    return "other"
