"""GPT-2 (124M) and GPT-2 Large (774M) language models, Hugging Face ``GPT2LMHeadModel`` layout.

Radford et al., "Language Models are Unsupervised Multitask Learners", 2019. Names follow
transformers (``transformer.wte``, ``transformer.h.N.attn.c_attn`` ...); HF's Conv1D is a
Linear with a transposed weight, so ``nn.Linear`` gives the same shapes' worth of parameters
and the same FLOPs. The LM head is tied to ``wte``, as in the released checkpoints, so the
vocabulary matrix is counted (and all-reduced) once: 124,439,808 and 774,030,080 parameters.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from srift.zoo._common import BatchFactory, LossFn, Options, ZooEntry, check_range

__all__ = ["ENTRIES", "GPT2Config", "GPT2LMHeadModel", "GPT2Model", "gpt2", "gpt2_large"]


class GPT2Config:
    def __init__(self, n_embd: int, n_layer: int, n_head: int) -> None:
        self.vocab_size = 50257
        self.n_positions = 1024
        self.n_embd = n_embd
        self.n_layer = n_layer
        self.n_head = n_head
        self.pdrop = 0.1  # resid, embd and attn dropout are all 0.1 in the released configs
        self.layer_norm_epsilon = 1e-5


GPT2_SMALL = GPT2Config(n_embd=768, n_layer=12, n_head=12)
GPT2_LARGE = GPT2Config(n_embd=1280, n_layer=36, n_head=20)


class GPT2Attention(nn.Module):
    def __init__(self, c: GPT2Config) -> None:
        super().__init__()
        self.n_head = c.n_head
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd)
        self.attn_pdrop = c.pdrop
        self.resid_dropout = nn.Dropout(c.pdrop)

    def forward(self, x: Tensor) -> Tensor:
        n, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (y.view(n, t, self.n_head, d // self.n_head).transpose(1, 2) for y in (q, k, v))
        out = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.attn_pdrop if self.training else 0.0
        )
        return self.resid_dropout(self.c_proj(out.transpose(1, 2).reshape(n, t, d)))


class GPT2MLP(nn.Module):
    def __init__(self, c: GPT2Config) -> None:
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd)
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd)
        self.dropout = nn.Dropout(c.pdrop)

    def forward(self, x: Tensor) -> Tensor:
        # GPT-2's "gelu_new" is the tanh approximation
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class GPT2Block(nn.Module):
    def __init__(self, c: GPT2Config) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)
        self.attn = GPT2Attention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)
        self.mlp = GPT2MLP(c)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, c: GPT2Config) -> None:
        super().__init__()
        self.wte = nn.Embedding(c.vocab_size, c.n_embd)
        self.wpe = nn.Embedding(c.n_positions, c.n_embd)
        self.drop = nn.Dropout(c.pdrop)
        self.h = nn.ModuleList(GPT2Block(c) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)

    def forward(self, input_ids: Tensor) -> Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(positions))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    """Returns next-token logits (N, T, vocab)."""

    def __init__(self, c: GPT2Config) -> None:
        super().__init__()
        self.config = c
        self.transformer = GPT2Model(c)
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self._init_weights()
        self.tie_weights()

    def tie_weights(self) -> None:
        """Share wte with the LM head (call again after anything that replaces parameters)."""
        self.lm_head.weight = self.transformer.wte.weight

    def _init_weights(self) -> None:
        # GPT-2's initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer)
        for name, m in self.named_modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                std = 0.02
                if name.endswith("c_proj"):
                    std /= math.sqrt(2 * self.config.n_layer)
                nn.init.normal_(m.weight, 0.0, std)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.lm_head(self.transformer(input_ids))


def _batch(factory: BatchFactory, batch_size: int, options: Options) -> tuple[Tensor, Tensor]:
    t = options["seq_len"]
    if factory.meta:
        return factory.empty((batch_size, t), torch.int64), factory.empty((batch_size, t), torch.int64)
    # one stream of t+1 tokens: inputs are the first t, targets the next token at each place
    tokens = factory.randint(0, GPT2_SMALL.vocab_size, (batch_size, t + 1))
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def _loss(options: Options) -> LossFn:
    def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    return lm_loss


def _validate(options: Options) -> None:
    check_range("seq_len", options["seq_len"], 1, GPT2_SMALL.n_positions)


def _entry(name: str, c: GPT2Config, params: int, label: str) -> ZooEntry:
    make: Callable[[Options], nn.Module] = lambda o: GPT2LMHeadModel(c)  # noqa: E731
    return ZooEntry(
        name=name,
        family="gpt2",
        params=params,
        params_source=f"Hugging Face {label} (GPT2LMHeadModel, lm_head tied to wte): {params:,}",
        source=f"Radford et al., 2019; Hugging Face transformers GPT2LMHeadModel layout ({label})",
        task="causal language modelling",
        sample_unit="sequences",
        loss="next-token cross-entropy",
        defaults={"seq_len": 1024},
        make_model=make,
        make_batch=_batch,
        make_loss=_loss,
        input_shape=lambda o: (o["seq_len"],),
        validate=_validate,
        notes="option seq_len (<= 1024); targets are the inputs shifted by one token",
        extra={"n_embd": c.n_embd, "n_layer": c.n_layer, "n_head": c.n_head, "vocab_size": c.vocab_size},
    )


gpt2 = _entry("gpt2", GPT2_SMALL, 124_439_808, "gpt2")
gpt2_large = _entry("gpt2_large", GPT2_LARGE, 774_030_080, "gpt2-large")

ENTRIES: tuple[ZooEntry, ...] = (gpt2, gpt2_large)
