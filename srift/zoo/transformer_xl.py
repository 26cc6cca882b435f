"""Transformer-XL on WikiText-103, NVIDIA DeepLearningExamples PyTorch layout (base and large).

Dai et al., "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context", 2019;
NVIDIA DeepLearningExamples ``PyTorch/LanguageModeling/Transformer-XL/pytorch``. Written with
torch alone after ``mem_transformer.py`` (``MemTransformerLM`` with ``attn_type=0``:
``RelPartialLearnableDecoderLayer`` = ``RelPartialLearnableMultiHeadAttn`` + ``PositionwiseFF``,
post-LayerNorm, ``AdaptiveEmbedding``) and ``utils/proj_adaptive_softmax.py``
(``ProjectedAdaptiveLogSoftmax``); module names follow the reference (``word_emb``, ``layers.N
.dec_attn.qkv_net``, ``crit`` ...). The entries are the runs of Lambda's deeplearning-benchmark
(whose throughputs srift learns from): train.py on WikiText-103 (267,735 words) without
``--adaptive``, so a full softmax tied to the input embedding; base 16 x 512 at tgt_len = mem_len
= 192, large 18 x 1024 at 256 (the counts equal the parameters its logs print). Option
``adaptive=True`` gives the wt103 set-up of ``wt103_base.yaml``: cutoffs [19997, 39997,
199997], ``tie_projs = [False, True, True, True]``, ``d_embed = d_model``; with it, option
``div_val`` narrows tail cluster i to d_embed / div_val**i (``wt103_large.yaml``, which NVIDIA's
own benchmarks run: div_val 4, tgt_len = mem_len = 384, 285,167,482 parameters).

Like the reference, the relative attention is unfused: einsum scores AC + BD with
``_rel_shift``, masked softmax, einsum with the values. The model runs time-major inside
(``(tgt_len, batch)``), but takes and returns batch-major tensors (the zoo's contract).

Memory recurrence. Training feeds consecutive segments of each stream, and every layer attends
over ``mem_len`` cached hidden states (detached, no gradient) plus the ``tgt_len`` current
ones: klen = mem_len + tgt_len. The example batch is one segment, so ``forward`` builds the
steady-state memory itself when none is passed: zeros of shape (mem_len, batch, d_model) per
layer, detached. Their values do not matter for the cost, their length does: the key/value
projections run over klen positions and the score matrices are tgt_len x klen. (The reference
also carries the new memory to the next step, a no-grad copy of each layer's input; that copy
is left out here, since forward returns only the loss.)

Word frequencies (adaptive=True only). The adaptive input and softmax route each token by its frequency class,
so how much the tail clusters cost depends on the data. Word ids are frequency ranks (the
reference's vocabulary is ordered by count), and the example batch draws them from a
Zipf-Mandelbrot law p(r) ~ (r + 6)^-1.364 over the 267,735 ranks, fitted to WikiText-103
(103,227,021 training tokens; the rarest kept word occurs 3 times; the top token ~5%). That
puts 96.6% / 1.2% / 1.9% / 0.24% of tokens in the four clusters. On the meta device, where the
routing cannot look at token values, every cluster gets its expected share of the tokens, so
the analysed FLOPs match those of real WikiText-103 training (uniformly random ids would put
60% of tokens in the 160,000-word cluster and inflate the softmax cost several times).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from srift.zoo._common import BatchFactory, LossFn, Options, ZooEntry, check_range

__all__ = [
    "ENTRIES",
    "AdaptiveEmbedding",
    "MemTransformerLM",
    "ProjectedAdaptiveLogSoftmax",
    "TransformerXLConfig",
    "transformer_xl_base",
    "transformer_xl_large",
    "wt103_cluster_fractions",
]

WT103_VOCAB = 267_735  # len(corpus.vocab) for wt103 (wt103_large.yaml manual_config n_token)
WT103_CUTOFFS = (19_997, 39_997, 199_997)  # train.py, dataset == 'wt103'
# Zipf-Mandelbrot law for WikiText-103 word ranks (see the module docstring)
ZIPF_EXPONENT = 1.364
ZIPF_SHIFT = 6.0
MAX_LEN = 4096  # bound on tgt_len and mem_len options (the large eval uses mem_len 1600)


@dataclass(frozen=True)
class TransformerXLConfig:
    n_layer: int
    d_model: int
    n_head: int
    d_head: int
    d_inner: int
    dropout: float
    dropatt: float
    tgt_len: int
    mem_len: int
    div_val: int
    init_std: float
    n_token: int = WT103_VOCAB
    cutoffs: tuple[int, ...] = WT103_CUTOFFS
    tie_weight: bool = True
    proj_init_std: float = 0.01  # train.py default

    @property
    def d_embed(self) -> int:
        return self.d_model  # train.py: d_embed = -1 -> d_model

    @property
    def tie_projs(self) -> tuple[bool, ...]:
        return (False,) + (True,) * len(self.cutoffs)  # train.py for wt103


# wt103_base.yaml, section train (init_std 0.02 is train.py's default)
WT103_BASE = TransformerXLConfig(
    n_layer=16, d_model=512, n_head=8, d_head=64, d_inner=2048, dropout=0.1, dropatt=0.0,
    tgt_len=192, mem_len=192, div_val=1, init_std=0.02,
)
# What Lambda's deeplearning-benchmark runs (config_v1 PyTorch_transformerxl{base,large}_*_PARAMS):
# train.py's command line without --adaptive, i.e. a full softmax over all 267,735 words (tied
# to the input embedding), div_val 1 and init_std 0.02; large at tgt_len = mem_len = 256. Its
# logs print "#params = 191948759" and "519963095", which these give exactly. The zoo's entries
# are these configs (the data srift learns from); option adaptive=True restores the wt103
# cutoffs (the yaml files' own training set-up, with div_val 1).
LAMBDA_BASE = replace(WT103_BASE, cutoffs=())
LAMBDA_LARGE = TransformerXLConfig(
    n_layer=18, d_model=1024, n_head=16, d_head=64, d_inner=4096, dropout=0.2, dropatt=0.2,
    tgt_len=256, mem_len=256, div_val=1, init_std=0.02, cutoffs=(),
)


def _rank_probs(n_token: int) -> Tensor:
    # always on the CPU, also while a model is being built under torch.device("meta")
    ranks = torch.arange(1, n_token + 1, dtype=torch.float64, device="cpu")
    w = (ranks + ZIPF_SHIFT).pow(-ZIPF_EXPONENT)
    return w / w.sum()


@functools.lru_cache(maxsize=8)
def _cluster_fractions(n_token: int, cutoffs: tuple[int, ...]) -> tuple[float, ...]:
    p = _rank_probs(n_token)
    ends = [0, *cutoffs, n_token]
    return tuple(float(p[ends[i]:ends[i + 1]].sum()) for i in range(len(ends) - 1))


def wt103_cluster_fractions(n_token: int = WT103_VOCAB, cutoffs: Sequence[int] = WT103_CUTOFFS) -> list[float]:
    """Share of tokens in each adaptive-softmax cluster under the WikiText-103 rank law."""
    return list(_cluster_fractions(n_token, tuple(cutoffs)))


def _split_counts(shares: Sequence[float], n: int) -> list[int]:
    """Expected tokens per cluster among n: tails rounded, the head takes the rest."""
    tails = [math.floor(s * n + 0.5) for s in shares[1:]]
    return [n - sum(tails), *tails]


def _cluster_indices(ids: Tensor, lo: int, hi: int, expected: int) -> Tensor:
    """Positions of the ids in [lo, hi); on meta (no values), `expected` placeholder positions."""
    mask = (ids >= lo) & (ids < hi)
    if ids.device.type != "meta":
        return mask.nonzero().squeeze(1)
    return ids.new_empty(expected)


class PositionalEmbedding(nn.Module):
    """Sinusoidal embedding of relative distances klen-1 ... 0 (no parameters)."""

    def __init__(self, demb: int) -> None:
        super().__init__()
        self.demb = demb
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0.0, demb, 2.0) / demb)))

    def forward(self, pos_seq: Tensor) -> Tensor:
        angles = torch.outer(pos_seq, self.inv_freq)
        return torch.cat([angles.sin(), angles.cos()], dim=-1)[:, None, :]  # (klen, 1, demb)


class PositionwiseFF(nn.Module):
    def __init__(self, d_model: int, d_inner: int, dropout: float) -> None:
        super().__init__()
        self.CoreNet = nn.Sequential(
            nn.Linear(d_model, d_inner),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(d_inner, d_model),
            nn.Dropout(dropout),
        )
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, inp: Tensor) -> Tensor:
        return self.layer_norm(inp + self.CoreNet(inp))  # post-LN (pre_lnorm False in wt103)


class RelPartialLearnableMultiHeadAttn(nn.Module):
    """Relative multi-head attention with global content/position biases (Transformer-XL)."""

    def __init__(self, n_head: int, d_model: int, d_head: int, dropout: float, dropatt: float) -> None:
        super().__init__()
        self.n_head = n_head
        self.d_head = d_head
        self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
        self.drop = nn.Dropout(dropout)
        self.dropatt = nn.Dropout(dropatt)
        self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model)
        self.scale = 1.0 / math.sqrt(d_head)
        self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)

    @staticmethod
    def _rel_shift(x: Tensor) -> Tensor:
        # (b, n, qlen, klen): pad one zero column, reinterpret, drop the first row, so row i
        # is shifted left by qlen-1-i and entry (i, j) holds distance klen-1-(j - i + mlen)
        b, n, q, k = x.shape
        padded = torch.cat([x.new_zeros(b, n, q, 1), x], dim=3).view(b, n, k + 1, q)
        return padded[:, :, 1:].view_as(x)

    def forward(
        self, w: Tensor, r: Tensor, r_w_bias: Tensor, r_r_bias: Tensor, attn_mask: Tensor, mems: Tensor | None
    ) -> Tensor:
        qlen, bsz = w.shape[0], w.shape[1]
        cat = w if mems is None else torch.cat([mems, w], 0)
        w_heads = self.qkv_net(cat)  # keys and values over memory + segment
        r_head_k = self.r_net(r)
        w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
        w_head_q = w_head_q[-qlen:]
        klen, rlen = w_head_k.shape[0], r.shape[0]

        w_head_q = w_head_q.reshape(qlen, bsz, self.n_head, self.d_head)
        w_head_k = w_head_k.reshape(klen, bsz, self.n_head, self.d_head)
        w_head_v = w_head_v.reshape(klen, bsz, self.n_head, self.d_head)
        r_head_k = r_head_k.reshape(rlen, self.n_head, self.d_head)

        ac = torch.einsum("ibnd,jbnd->bnij", w_head_q + r_w_bias, w_head_k)  # content terms (a)+(c)
        bd = torch.einsum("ibnd,jnd->bnij", w_head_q + r_r_bias, r_head_k)  # position terms (b)+(d)
        attn_score = ac + self._rel_shift(bd)
        attn_score.mul_(self.scale)
        attn_score.masked_fill_(attn_mask[None, None], -float("inf"))

        attn_prob = self.dropatt(F.softmax(attn_score, dim=3))
        attn_vec = torch.einsum("bnij,jbnd->ibnd", attn_prob, w_head_v)
        attn_vec = attn_vec.reshape(qlen, bsz, self.n_head * self.d_head)
        attn_out = self.drop(self.o_net(attn_vec))
        return self.layer_norm(w + attn_out)


class RelPartialLearnableDecoderLayer(nn.Module):
    def __init__(self, n_head: int, d_model: int, d_head: int, d_inner: int, dropout: float, dropatt: float) -> None:
        super().__init__()
        self.dec_attn = RelPartialLearnableMultiHeadAttn(n_head, d_model, d_head, dropout, dropatt)
        self.pos_ff = PositionwiseFF(d_model, d_inner, dropout)

    def forward(
        self, dec_inp: Tensor, r: Tensor, r_w_bias: Tensor, r_r_bias: Tensor, dec_attn_mask: Tensor, mems: Tensor | None
    ) -> Tensor:
        return self.pos_ff(self.dec_attn(dec_inp, r, r_w_bias, r_r_bias, dec_attn_mask, mems))


def _embedding(num: int, dim: int) -> nn.Embedding:
    # uninitialised table (MemTransformerLM._init_weights fills it): skips nn.Embedding's own
    # N(0, 1) draw, which for 267,735 x 512 words would double the build time on a CPU
    return nn.Embedding(num, dim, _weight=torch.empty(num, dim))


def _set_clusters(m: nn.Module, n_token: int, d_embed: int, d_proj: int, cutoffs: Sequence[int],
                  div_val: int) -> None:
    """The vocabulary split both adaptive modules share (the reference's attribute names)."""
    m.n_token, m.d_embed, m.d_proj, m.div_val = n_token, d_embed, d_proj, div_val
    m.cutoffs = [*cutoffs, n_token]
    m.cutoff_ends = [0, *m.cutoffs]


class AdaptiveEmbedding(nn.Module):
    """Adaptive input: per-cluster tables of width d_embed / div_val**i, projected to d_proj."""

    def __init__(
        self, n_token: int, d_embed: int, d_proj: int, cutoffs: Sequence[int], div_val: int,
        shares: Sequence[float],
    ) -> None:
        super().__init__()
        _set_clusters(self, n_token, d_embed, d_proj, cutoffs, div_val)
        self.shares = list(shares)
        self.emb_scale = d_proj**0.5
        self.emb_layers = nn.ModuleList()
        self.emb_projs = nn.ParameterList()
        if div_val == 1:
            self.emb_layers.append(_embedding(n_token, d_embed))
            if d_proj != d_embed:
                self.emb_projs.append(nn.Parameter(torch.empty(d_proj, d_embed)))
        else:
            for i in range(len(self.cutoffs)):
                d_emb_i = d_embed // div_val**i
                self.emb_layers.append(_embedding(self.cutoff_ends[i + 1] - self.cutoff_ends[i], d_emb_i))
                self.emb_projs.append(nn.Parameter(torch.empty(d_proj, d_emb_i)))

    def forward(self, inp: Tensor) -> Tensor:
        if self.div_val == 1:
            embed = self.emb_layers[0](inp)
            if self.d_proj != self.d_embed:
                embed = F.linear(embed, self.emb_projs[0])
        else:
            inp_flat = inp.reshape(-1)
            n = inp_flat.shape[0]
            counts = _split_counts(self.shares, n)
            weight = self.emb_layers[0].weight
            emb_flat = torch.zeros(n, self.d_proj, dtype=weight.dtype, device=weight.device)
            for i in range(len(self.cutoffs)):
                lo, hi = self.cutoff_ends[i], self.cutoff_ends[i + 1]
                indices_i = _cluster_indices(inp_flat, lo, hi, counts[i])
                if indices_i.numel() == 0:
                    continue
                emb_i = F.linear(self.emb_layers[i](inp_flat.index_select(0, indices_i) - lo), self.emb_projs[i])
                emb_flat.index_copy_(0, indices_i, emb_i.to(emb_flat.dtype))
            embed = emb_flat.view(*inp.shape, self.d_proj)
        return embed.mul_(self.emb_scale)


class ProjectedAdaptiveLogSoftmax(nn.Module):
    """Adaptive softmax NLL (Grave et al.) with per-cluster projections, as in the reference.

    The head scores the shortlist plus one logit per tail cluster; a token in tail cluster i
    adds the log-probability within that cluster. With tied weights the output tables are the
    embedding's own Parameters (and projections where ``tie_projs`` says so), set by the owner
    via ``tie_to``; only untied pieces are created here.
    """

    def __init__(
        self, n_token: int, d_embed: int, d_proj: int, cutoffs: Sequence[int], div_val: int,
        tie_projs: Sequence[bool], tie_weight: bool, shares: Sequence[float],
    ) -> None:
        super().__init__()
        _set_clusters(self, n_token, d_embed, d_proj, cutoffs, div_val)
        self.n_clusters = len(self.cutoffs) - 1
        self.shortlist_size = self.cutoffs[0]
        self.tie_projs = list(tie_projs)
        self.tie_weight = tie_weight
        self.shares = list(shares)

        if self.n_clusters > 0:
            self.cluster_weight = nn.Parameter(torch.zeros(self.n_clusters, d_embed))
            self.cluster_bias = nn.Parameter(torch.zeros(self.n_clusters))

        n_tables = 1 if div_val == 1 else len(self.cutoffs)
        widths = [d_embed // div_val**i for i in range(n_tables)]
        sizes = [n_token] if div_val == 1 else [self.cutoff_ends[i + 1] - self.cutoff_ends[i] for i in range(n_tables)]
        self.out_layers_biases = nn.ParameterList(nn.Parameter(torch.zeros(s)) for s in sizes)
        # tied: filled with the embedding tables by tie_to; untied: own tables
        self.out_layers_weights = nn.ParameterList(
            () if tie_weight else (nn.Parameter(torch.zeros(s, w)) for s, w in zip(sizes, widths))
        )
        # projection of cluster i: own (untied) or the embedding's (tied); none when div_val 1
        # and d_proj == d_embed. The own ones live in own_out_projs, keyed by cluster.
        self.own_out_projs = nn.ParameterDict()
        self._needs_proj = div_val > 1 or d_proj != d_embed
        if self._needs_proj:
            for i in range(len(self.cutoffs)):
                if not self.tie_projs[i]:
                    width = widths[0] if div_val == 1 else widths[i]
                    self.own_out_projs[str(i)] = nn.Parameter(torch.zeros(d_proj, width))
        self.shared_out_projs: list[nn.Parameter] = []

    def tie_to(self, emb: AdaptiveEmbedding) -> None:
        """Share the embedding's tables (tie_weight) and projections (tie_projs)."""
        if self.tie_weight:
            self.out_layers_weights = nn.ParameterList(layer.weight for layer in emb.emb_layers)
        # a plain list: the projections are registered (and counted) under word_emb
        self.shared_out_projs = list(emb.emb_projs)

    def get_out_proj(self, i: int) -> Tensor | None:
        if not self._needs_proj:
            return None
        if not self.tie_projs[i]:
            return self.own_out_projs[str(i)]
        if not self.shared_out_projs:
            return None
        return self.shared_out_projs[0] if len(self.shared_out_projs) == 1 else self.shared_out_projs[i]

    @staticmethod
    def _compute_logit(hidden: Tensor, weight: Tensor, bias: Tensor, proj: Tensor | None) -> Tensor:
        if proj is not None:
            hidden = hidden @ proj  # reference: einsum('bd,de,ev->bv'), contracted left to right
        return F.linear(hidden, weight, bias)

    def forward(self, hidden: Tensor, target: Tensor) -> Tensor:
        """hidden (N, d_proj), target (N,) -> NLL (N,) in the targets' order."""
        if self.n_clusters == 0:
            logit = self._compute_logit(hidden, self.out_layers_weights[0], self.out_layers_biases[0], self.get_out_proj(0))
            return -F.log_softmax(logit, dim=-1).gather(1, target[:, None]).squeeze(1)

        weights, biases = [], []
        for i in range(len(self.cutoffs)):
            if self.div_val == 1:
                lo, hi = self.cutoff_ends[i], self.cutoff_ends[i + 1]
                weight_i, bias_i = self.out_layers_weights[0][lo:hi], self.out_layers_biases[0][lo:hi]
            else:
                weight_i, bias_i = self.out_layers_weights[i], self.out_layers_biases[i]
            if i == 0:
                weight_i = torch.cat([weight_i, self.cluster_weight], dim=0)
                bias_i = torch.cat([bias_i, self.cluster_bias], dim=0)
            weights.append(weight_i)
            biases.append(bias_i)

        head_logit = self._compute_logit(hidden, weights[0], biases[0], self.get_out_proj(0))
        head_logprob = F.log_softmax(head_logit, dim=1)

        n = target.shape[0]
        counts = _split_counts(self.shares, n)
        nll = torch.zeros(n, dtype=hidden.dtype, device=hidden.device)
        for i in range(len(self.cutoffs)):
            lo, hi = self.cutoff_ends[i], self.cutoff_ends[i + 1]
            indices_i = _cluster_indices(target, lo, hi, counts[i])
            if indices_i.numel() == 0:
                continue
            target_i = target.index_select(0, indices_i) - lo
            head_logprob_i = head_logprob.index_select(0, indices_i)
            if i == 0:
                logprob_i = head_logprob_i.gather(1, target_i[:, None]).squeeze(1)
            else:
                hidden_i = hidden.index_select(0, indices_i)
                tail_logit_i = self._compute_logit(hidden_i, weights[i], biases[i], self.get_out_proj(i))
                tail_logprob_i = F.log_softmax(tail_logit_i, dim=1)
                # the reference reads cluster i's head logit at column -i
                logprob_i = head_logprob_i[:, -i] + tail_logprob_i.gather(1, target_i[:, None]).squeeze(1)
            nll.index_copy_(0, indices_i, (-logprob_i).to(nll.dtype))
        return nll


class MemTransformerLM(nn.Module):
    """Transformer-XL LM; ``forward(data, target)`` with (batch, tgt_len) ids -> NLL (batch, tgt_len)."""

    def __init__(self, c: TransformerXLConfig, mem_len: int | None = None) -> None:
        super().__init__()
        self.config = c
        self.n_token = c.n_token
        self.d_model = c.d_model
        self.n_layer = c.n_layer
        self.mem_len = c.mem_len if mem_len is None else mem_len
        shares = wt103_cluster_fractions(c.n_token, c.cutoffs) if c.cutoffs else [1.0]

        self.word_emb = AdaptiveEmbedding(c.n_token, c.d_embed, c.d_model, c.cutoffs, c.div_val, shares)
        self.drop = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(
            RelPartialLearnableDecoderLayer(c.n_head, c.d_model, c.d_head, c.d_inner, c.dropout, c.dropatt)
            for _ in range(c.n_layer)
        )
        self.crit = ProjectedAdaptiveLogSoftmax(
            c.n_token, c.d_embed, c.d_model, c.cutoffs, c.div_val, c.tie_projs, c.tie_weight, shares
        )
        self.pos_emb = PositionalEmbedding(c.d_model)
        self.r_w_bias = nn.Parameter(torch.empty(c.n_head, c.d_head))
        self.r_r_bias = nn.Parameter(torch.empty(c.n_head, c.d_head))
        self._init_weights()
        self.tie_weights()

    def tie_weights(self) -> None:
        """Share the embedding tables/projections with ``crit`` (again after moves)."""
        self.crit.tie_to(self.word_emb)

    def _init_weights(self) -> None:
        # train.py weights_init with init='normal': N(0, init_std) weights, zero biases,
        # N(0, proj_init_std) projections, LayerNorm gains N(1, init_std)
        c = self.config
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, c.init_std)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, 0.0, c.init_std)
            elif isinstance(m, nn.LayerNorm):
                nn.init.normal_(m.weight, 1.0, c.init_std)
                nn.init.zeros_(m.bias)
        for p in self.word_emb.emb_projs:
            nn.init.normal_(p, 0.0, c.proj_init_std)
        for p in self.crit.own_out_projs.values():
            nn.init.normal_(p, 0.0, c.proj_init_std)
        if self.crit.n_clusters > 0:
            nn.init.normal_(self.crit.cluster_weight, 0.0, c.init_std)
            nn.init.zeros_(self.crit.cluster_bias)
        if not self.crit.tie_weight:
            for p in self.crit.out_layers_weights:
                nn.init.normal_(p, 0.0, c.init_std)
        nn.init.normal_(self.r_w_bias, 0.0, c.init_std)
        nn.init.normal_(self.r_r_bias, 0.0, c.init_std)

    def steady_state_mems(self, bsz: int, like: Tensor) -> list[Tensor] | None:
        """Memory as it stands after the first segment: mem_len detached states per layer.

        Zeros stand in for the previous segment's hidden states; what costs compute (and
        activation memory) in steady-state training is their length, not their values.
        """
        if self.mem_len <= 0:
            return None
        return [like.new_zeros(self.mem_len, bsz, self.d_model) for _ in range(self.n_layer)]

    def _forward(self, dec_inp: Tensor, mems: list[Tensor] | None) -> Tensor:
        qlen, _ = dec_inp.shape
        word_emb = self.word_emb(dec_inp)
        mlen = mems[0].shape[0] if mems is not None else 0
        klen = mlen + qlen
        # causal over the segment, every memory position visible (same_length False in training)
        dec_attn_mask = torch.triu(word_emb.new_ones(qlen, klen), diagonal=1 + mlen).bool()

        pos_seq = torch.arange(klen - 1, -1, -1.0, device=word_emb.device, dtype=word_emb.dtype)
        pos_emb = self.drop(self.pos_emb(pos_seq))  # clamp_len -1 in training
        core_out = self.drop(word_emb)
        for i, layer in enumerate(self.layers):
            mems_i = None if mems is None else mems[i]
            core_out = layer(core_out, pos_emb, self.r_w_bias, self.r_r_bias, dec_attn_mask, mems_i)
        return self.drop(core_out)

    def forward(self, data: Tensor, target: Tensor, mems: list[Tensor] | None = None) -> Tensor:
        """data, target: (batch, tgt_len) word ids. Returns the per-token NLL (batch, tgt_len).

        Without ``mems``, the steady-state memory is built here (see the module docstring).
        """
        dec_inp = data.t()  # time-major as in the reference: (tgt_len, batch)
        tgt = target.t()
        if mems is None:
            with torch.no_grad():
                mems = self.steady_state_mems(dec_inp.shape[1], self.r_w_bias.detach())
        hidden = self._forward(dec_inp, mems)
        tgt_len = tgt.shape[0]
        pred_hid = hidden[-tgt_len:]
        loss = self.crit(pred_hid.reshape(-1, pred_hid.shape[-1]), tgt.reshape(-1))
        return loss.view(tgt_len, -1).t()


def n_params_by_hand(c: TransformerXLConfig) -> int:
    """The parameter count of MemTransformerLM(c) from the reference's structure."""
    ends = [0, *c.cutoffs, c.n_token]
    d, hd = c.d_model, c.n_head * c.d_head
    layer = (
        d * 3 * hd + d * hd + hd * d + 2 * d  # qkv_net, r_net, o_net (no bias), LayerNorm
        + d * c.d_inner + c.d_inner + c.d_inner * d + d + 2 * d  # CoreNet and its LayerNorm
    )
    if c.div_val == 1:
        emb = c.n_token * c.d_embed + (0 if c.d_model == c.d_embed else c.d_model * c.d_embed)
        widths = [c.d_embed] * (len(ends) - 1)
    else:
        widths = [c.d_embed // c.div_val**i for i in range(len(ends) - 1)]
        emb = sum((ends[i + 1] - ends[i]) * w + c.d_model * w for i, w in enumerate(widths))
    needs_proj = c.div_val > 1 or c.d_model != c.d_embed
    own_projs = sum(c.d_model * widths[i] for i, tied in enumerate(c.tie_projs) if needs_proj and not tied)
    n_clusters = len(c.cutoffs)
    crit = n_clusters * c.d_embed + n_clusters + c.n_token + own_projs  # cluster rows, biases
    return emb + c.n_layer * layer + 2 * c.n_head * c.d_head + crit


def _batch(factory: BatchFactory, batch_size: int, options: Options) -> tuple[tuple[Tensor, Tensor], Tensor]:
    t = options["tgt_len"]
    if factory.meta:
        data, target = factory.empty((batch_size, t), torch.int64), factory.empty((batch_size, t), torch.int64)
        return (data, target), target
    # one stream of t+1 words per sample, ids drawn from the WikiText-103 rank law; the
    # targets are the inputs shifted by one, as LMOrderedIterator makes them
    probs = _rank_probs(WT103_VOCAB).to(torch.float32)
    ids = torch.multinomial(probs, batch_size * (t + 1), replacement=True, generator=factory.generator)
    tokens = factory.cpu_tensor(ids.view(batch_size, t + 1))
    data, target = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    return (data, target), target


def _loss(options: Options) -> LossFn:
    def mean_nll(nll: Tensor, targets: Tensor) -> Tensor:
        return nll.mean()  # train.py: loss.float().mean()

    return mean_nll


def _validate(options: Options) -> None:
    check_range("tgt_len", options["tgt_len"], 1, MAX_LEN)
    check_range("mem_len", options["mem_len"], 0, MAX_LEN)
    div_val = options["div_val"]  # an int: zoo.build checks option types against the defaults
    # The tail clusters' width d_embed / div_val**i must stay >= 1 (the narrowest is i = 3).
    check_range("div_val", div_val, 1, 32)
    if div_val != 1 and not options["adaptive"]:
        raise ValueError(f"option div_val={div_val} narrows the adaptive tail clusters; it needs adaptive=True")


def _config(c: TransformerXLConfig, options: Options) -> TransformerXLConfig:
    # wt103_{base,large}.yaml: the cutoffs, and div_val 1 (base) or 4 (large)
    return replace(c, cutoffs=WT103_CUTOFFS, div_val=options["div_val"]) if options["adaptive"] else c


def _entry(name: str, c: TransformerXLConfig, published: int, run: str) -> ZooEntry:
    params = n_params_by_hand(c)
    if params != published:
        raise AssertionError(f"{name}: {params} parameters by hand, Lambda's log says {published}")
    make: Callable[[Options], nn.Module] = lambda o: MemTransformerLM(_config(c, o), mem_len=o["mem_len"])  # noqa: E731
    return ZooEntry(
        name=name,
        family="transformer_xl",
        params=params,
        params_source=(
            f"Lambda deeplearning-benchmark's training log ('#params = {published}', {run}), equal "
            f"to the count from NVIDIA DeepLearningExamples mem_transformer.py with that command "
            f"line (full softmax tied to the embedding): {params:,}"
        ),
        source=(
            "Dai et al., 2019; NVIDIA DeepLearningExamples PyTorch/LanguageModeling/Transformer-XL "
            f"(MemTransformerLM, attn_type 0) as Lambda's benchmark runs it: {run}"
        ),
        task="word-level language modelling (WikiText-103)",
        sample_unit="sequences",
        loss="softmax negative log-likelihood (adaptive with adaptive=True), mean over tokens",
        defaults={"tgt_len": c.tgt_len, "mem_len": c.mem_len, "adaptive": False, "div_val": 1},
        make_model=make,
        make_batch=_batch,
        make_loss=_loss,
        input_shape=lambda o: (o["tgt_len"],),
        validate=_validate,
        notes=(
            "one sample is a segment of tgt_len words; every layer also attends over mem_len "
            "cached states (steady-state memory built in forward); options tgt_len, mem_len, adaptive "
            "(the wt103 cutoffs [19997, 39997, 199997]), div_val (with adaptive: tail cluster i is "
            "d_embed / div_val**i wide; wt103_large.yaml uses 4); "
            "inputs are (data, target), the model returns the per-token NLL"
        ),
        extra={
            "n_layer": c.n_layer,
            "d_model": c.d_model,
            "n_head": c.n_head,
            "d_head": c.d_head,
            "d_inner": c.d_inner,
            "d_embed": c.d_embed,
            "dropout": c.dropout,
            "dropatt": c.dropatt,
            "tgt_len": c.tgt_len,
            "mem_len": c.mem_len,
            "cutoffs": list(c.cutoffs),
            "div_val": c.div_val,
            "vocab_size": c.n_token,
            "tie_projs": list(c.tie_projs),
            "cluster_token_shares": [round(s, 5) for s in wt103_cluster_fractions(c.n_token, c.cutoffs)],
        },
    )


transformer_xl_base = _entry("transformer_xl_base", LAMBDA_BASE, 191_948_759,
                             "16 layers, d_model 512, 8 heads, d_inner 2048, tgt_len = mem_len = 192")
transformer_xl_large = _entry("transformer_xl_large", LAMBDA_LARGE, 519_963_095,
                              "18 layers, d_model 1024, 16 heads, d_inner 4096, tgt_len = mem_len = 256")

ENTRIES: tuple[ZooEntry, ...] = (transformer_xl_base, transformer_xl_large)
