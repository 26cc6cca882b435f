"""srift.zoo Transformer-XL (NVIDIA DeepLearningExamples layout): counts, FLOPs, a CPU step."""
from __future__ import annotations

import math

import pytest
from conftest import n_params
import torch

import srift
from srift import zoo
from srift.zoo import transformer_xl as txl
from srift.zoo._common import BatchFactory

NAMES = ("transformer_xl_base", "transformer_xl_large")

# Lambda's runs (full softmax, tied): word_emb 267,735 x d plus an output bias of 267,735 in
# crit; per layer qkv d x 3d + r_net d x d + o_net d x d + LN 2d + FF (d x 4d + 4d + 4d x d + d)
# + LN 2d; r_w_bias + r_r_bias 2d. The counts Lambda's training logs print.
BASE_PARAMS = 267_735 * 512 + 16 * 3_412_480 + 1_024 + 267_735
LARGE_PARAMS = 267_735 * 1024 + 18 * 13_640_704 + 2_048 + 267_735
# with adaptive=True: crit's cluster rows 3 x 512 and biases 3 on top (div_val 1: one table)
BASE_ADAPTIVE_PARAMS = BASE_PARAMS + 3 * 512 + 3
COUNTS = {"transformer_xl_base": BASE_PARAMS, "transformer_xl_large": LARGE_PARAMS}

TINY = txl.TransformerXLConfig(
    n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, dropout=0.1, dropatt=0.1,
    tgt_len=6, mem_len=5, div_val=2, init_std=0.02, n_token=50, cutoffs=(10, 20, 40),
)


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread) -> None:
    """Every test here on one intra-op thread (conftest.one_torch_thread)."""


def test_hand_counts() -> None:
    assert BASE_PARAMS == 191_948_759 and LARGE_PARAMS == 519_963_095  # "#params = ..." in the logs
    assert txl.n_params_by_hand(txl.LAMBDA_BASE) == BASE_PARAMS
    assert txl.n_params_by_hand(txl.LAMBDA_LARGE) == LARGE_PARAMS


def test_adaptive_option_restores_the_wt103_cutoffs() -> None:
    model, _, _ = zoo.build("transformer_xl_base", 2, device="meta", adaptive=True)
    assert n_params(model) == BASE_ADAPTIVE_PARAMS
    assert model.crit.cutoffs == [19_997, 39_997, 199_997, 267_735]


@pytest.mark.parametrize("name", NAMES)
def test_meta_param_count_and_info(name: str) -> None:
    model, ((data, target), targets), _ = zoo.build(name, 3, device="meta")
    info = zoo.info(name)
    assert n_params(model) == info["params"] == COUNTS[name]
    assert model.crit.out_layers_weights[0] is model.word_emb.emb_layers[0].weight  # tied
    t = info["tgt_len"]
    assert data.shape == target.shape == targets.shape == (3, t) and info["input_shape"] == [t]
    assert info["sample_unit"] == "sequences" and info["vocab_size"] == 267_735
    assert info["cutoffs"] == [] and info["default_options"]["adaptive"] is False
    assert (t, info["mem_len"]) == ((192, 192) if name.endswith("base") else (256, 256))


@pytest.mark.parametrize("name", NAMES)
def test_meta_forward_backward(name: str) -> None:
    model, (inputs, targets), loss_fn = zoo.build(name, 2, device="meta")
    nll = model(*inputs)
    assert nll.shape == targets.shape
    loss = loss_fn(nll, targets)
    assert loss.shape == () and loss.device.type == "meta"
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_meta_profile_flops_match_hand_count() -> None:
    b, t, m = 2, 16, 24
    model, batch, loss_fn = zoo.build("transformer_xl_base", b, device="meta", tgt_len=t, mem_len=m, adaptive=True)
    prof = srift.profile(model, batch, loss_fn, device="meta", name="txl")
    c, k = txl.WT103_BASE, t + m
    d, hd, di = c.d_model, c.n_head * c.d_head, c.d_inner
    layer = (
        2 * d * 3 * hd * k  # qkv over memory + segment
        + 2 * k * d * hd / b  # r_net on the klen positions, shared by the batch
        + 3 * 2 * t * k * hd  # AC, BD and the weighted values
        + 2 * hd * d * t + 2 * 2 * d * di * t  # o_net, CoreNet
    )
    counts = txl._split_counts(txl.wt103_cluster_fractions(), b * t)
    sizes = [c.cutoffs[0] + 3, c.cutoffs[1] - c.cutoffs[0], c.cutoffs[2] - c.cutoffs[1], c.n_token - c.cutoffs[2]]
    crit = 2 * d * sizes[0] * t + sum(2 * d * n * v for n, v in zip(counts[1:], sizes[1:])) / b
    forward = sum(layer.forward_flops for layer in prof.layers)
    assert forward == pytest.approx(c.n_layer * layer + crit, rel=1e-9)
    kinds = {layer.name: layer.kind for layer in prof.layers}
    assert kinds["layers.0.dec_attn"] == "attention" and kinds["layers.0.dec_attn.qkv_net"] == "matmul"


def test_meta_profile_full_softmax_flops() -> None:
    b, t, m = 2, 16, 24
    adaptive = srift.profile(*zoo.build("transformer_xl_base", b, device="meta", tgt_len=t, mem_len=m, adaptive=True),
                             device="meta", name="a")
    full = srift.profile(*zoo.build("transformer_xl_base", b, device="meta", tgt_len=t, mem_len=m),
                         device="meta", name="f")
    crit = {layer.name: layer.forward_flops for layer in full.layers}["crit"]
    assert crit == pytest.approx(2 * 512 * 267_735 * t, rel=1e-9)  # every token against every word
    body = sum(layer.forward_flops for layer in full.layers) - crit
    assert body == pytest.approx(sum(layer.forward_flops for layer in adaptive.layers)
                                 - {layer.name: layer.forward_flops for layer in adaptive.layers}["crit"], rel=1e-9)


def test_cpu_training_step() -> None:
    model, (inputs, targets), loss_fn = zoo.build("transformer_xl_base", 2, tgt_len=8, mem_len=8, adaptive=True)
    loss = loss_fn(model(*inputs), targets)
    # at init the head is near uniform over 20,000 entries: about log(20,000), below log(vocab)
    assert math.isfinite(loss.item()) and math.log(20_000) - 1 < loss.item() < math.log(267_735)
    loss.backward()
    table = model.word_emb.emb_layers[0].weight
    # checking all 137M entries of the table's gradient costs seconds: check the rows in use
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p is not table)
    assert torch.isfinite(table.grad[torch.cat([inputs[0].flatten(), targets.flatten()])]).all()


def test_tiny_adaptive_model_step_and_count() -> None:
    torch.manual_seed(0)
    model = txl.MemTransformerLM(TINY)
    assert n_params(model) == txl.n_params_by_hand(TINY)
    data = torch.arange(12).remainder(TINY.n_token).view(2, 6) * 4 % TINY.n_token
    target = (data + 7) % TINY.n_token
    nll = model(data, target)
    assert nll.shape == (2, 6) and torch.isfinite(nll).all()
    nll.mean().backward()
    assert all(p.grad is not None for p in model.parameters())  # every cluster was hit


@pytest.mark.parametrize("div_val", [1, 2])
def test_adaptive_softmax_is_normalised(div_val: int) -> None:
    torch.manual_seed(0)
    c = txl.TransformerXLConfig(**{**TINY.__dict__, "div_val": div_val})
    crit = txl.MemTransformerLM(c).crit
    hidden = torch.randn(1, c.d_model).expand(c.n_token, -1)
    nll = crit(hidden, torch.arange(c.n_token))
    assert torch.logsumexp(-nll, 0).item() == pytest.approx(0.0, abs=1e-5)


def test_explicit_zero_mems_equal_steady_state() -> None:
    torch.manual_seed(0)
    model = txl.MemTransformerLM(TINY).eval()
    data = torch.randint(0, TINY.n_token, (3, 6))
    target = torch.randint(0, TINY.n_token, (3, 6))
    mems = [torch.zeros(TINY.mem_len, 3, TINY.d_model) for _ in range(TINY.n_layer)]
    assert torch.allclose(model(data, target), model(data, target, mems))
    other = [torch.randn(TINY.mem_len, 3, TINY.d_model) for _ in range(TINY.n_layer)]
    assert not torch.allclose(model(data, target), model(data, target, other))


def test_rel_shift_aligns_relative_distances() -> None:
    q, m = 4, 3
    k = q + m
    x = torch.randn(2, 3, q, k)
    y = txl.RelPartialLearnableMultiHeadAttn._rel_shift(x)
    for i in range(q):
        for j in range(i + m + 1):  # the positions the causal mask keeps
            assert torch.equal(y[..., i, j], x[..., i, j + q - 1 - i])


def test_mem_len_zero_builds_without_memory() -> None:
    model, (inputs, targets), loss_fn = zoo.build("transformer_xl_base", 2, device="meta", mem_len=0, tgt_len=8)
    loss_fn(model(*inputs), targets).backward()


def test_batch_is_deterministic_and_shifted() -> None:
    entry = txl.transformer_xl_base
    opts = {"tgt_len": 32, "mem_len": 8, "seed": 0}
    ((x1, y1), t1) = entry.make_batch(BatchFactory(torch.device("cpu"), 0), 4, opts)
    ((x2, y2), _) = entry.make_batch(BatchFactory(torch.device("cpu"), 0), 4, opts)
    ((x3, _), _) = entry.make_batch(BatchFactory(torch.device("cpu"), 1), 4, opts)
    assert torch.equal(x1, x2) and torch.equal(y1, y2) and not torch.equal(x1, x3)
    assert x1.shape == (4, 32) and torch.equal(x1[:, 1:], y1[:, :-1]) and t1 is y1
    assert 0 <= int(x1.min()) and int(x1.max()) < 267_735
    assert (x1 < 19_997).float().mean() > 0.8  # frequent words dominate, as in WikiText-103


def test_cluster_shares() -> None:
    shares = txl.wt103_cluster_fractions()
    assert sum(shares) == pytest.approx(1.0)
    assert 0.95 < shares[0] < 0.98 and all(0 < s < 0.03 for s in shares[1:])


@pytest.mark.parametrize(
    ("options", "fragment"),
    [({"tgt_len": 0}, "tgt_len"), ({"tgt_len": 10_000}, "tgt_len"), ({"mem_len": -1}, "mem_len"),
     ({"tgt_len": 8.0}, "tgt_len"), ({"seq_len": 8}, "seq_len")],
)
def test_bad_options(options: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        zoo.build("transformer_xl_base", 1, device="meta", **options)


def test_div_val_option_builds_wt103_large_as_nvidia_runs_it() -> None:
    # wt103_large.yaml: adaptive, div_val 4, tgt_len = mem_len = 384 (d_embed = d_model = 1024)
    model, _, _ = zoo.build("transformer_xl_large", 2, device="meta", adaptive=True, div_val=4, tgt_len=384,
                            mem_len=384)
    count = sum(p.numel() for p in model.parameters())
    config = txl.replace(txl.LAMBDA_LARGE, cutoffs=txl.WT103_CUTOFFS, div_val=4)
    assert count == txl.n_params_by_hand(config) == 285_167_482
    widths = [layer.weight.shape[1] for layer in model.word_emb.emb_layers]
    assert widths == [1024, 256, 64, 16]
    with pytest.raises(ValueError, match="option div_val=4 narrows the adaptive tail clusters; it needs adaptive=True"):
        zoo.build("transformer_xl_large", 2, device="meta", div_val=4)
    with pytest.raises(ValueError, match=r"option div_val must be in \[1, 32\], got 0"):
        zoo.build("transformer_xl_large", 2, device="meta", adaptive=True, div_val=0)
