"""BERT-Base and BERT-Large in the Hugging Face ``BertModel`` layout, fine-tuned on SQuAD.

Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers", NAACL 2019. Module and
parameter names follow transformers' ``BertForQuestionAnswering`` (``bert.embeddings``,
``bert.encoder.layer.N.attention.self.query`` ...) so profiles line up with what people run.

Parameter counts:
- ``BertModel`` with pooler (bert-base-uncased / bert-large-uncased): 109,482,240 / 335,141,888.
- default head "qa" = ``BertForQuestionAnswering``: no pooler (-H*H-H) plus ``qa_outputs``
  (H*2+2): 108,893,186 / 334,094,338.
- head "classification" = ``BertForSequenceClassification`` with 2 labels: the full BertModel
  (pooler used) plus ``classifier``: 109,483,778 / 335,143,938.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from srift.zoo._common import BatchFactory, LossFn, Options, ZooEntry, check_choice, check_range

__all__ = [
    "BERT_BASE",
    "BERT_LARGE",
    "BertConfig",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertModel",
    "ENTRIES",
    "bert_base",
    "bert_large",
]

HEADS = ("qa", "classification")


class BertConfig:
    def __init__(self, hidden: int, layers: int, heads: int, intermediate: int) -> None:
        self.vocab_size = 30522
        self.max_position = 512
        self.type_vocab_size = 2
        self.hidden = hidden
        self.layers = layers
        self.heads = heads
        self.intermediate = intermediate
        self.dropout = 0.1
        self.layer_norm_eps = 1e-12


BERT_BASE = BertConfig(hidden=768, layers=12, heads=12, intermediate=3072)
BERT_LARGE = BertConfig(hidden=1024, layers=24, heads=16, intermediate=4096)


class BertEmbeddings(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden)
        self.position_embeddings = nn.Embedding(c.max_position, c.hidden)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None) -> Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        # summed in registration order (the sum does not care) so hooks fire in that order
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.heads = c.heads
        self.head_dim = c.hidden // c.heads
        self.query = nn.Linear(c.hidden, c.hidden)
        self.key = nn.Linear(c.hidden, c.hidden)
        self.value = nn.Linear(c.hidden, c.hidden)
        self.dropout_p = c.dropout

    def _split(self, x: Tensor) -> Tensor:
        n, t, _ = x.shape
        return x.view(n, t, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout_p if self.training else 0.0
        )
        n, _, t, _ = out.shape
        return out.transpose(1, 2).reshape(n, t, self.heads * self.head_dim)


class BertSelfOutput(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertAttention(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = BertSelfOutput(c)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.output(self.self(x, mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.intermediate)

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(self.dense(x))  # exact (erf) GELU, BERT's "gelu"


class BertOutput(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(c.intermediate, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertLayer(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertOutput(c)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        a = self.attention(x, mask)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(c) for _ in range(c.layers))

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        for layer in self.layer:
            x = layer(x, mask)
        return x


class BertPooler(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.hidden)

    def forward(self, hidden: Tensor) -> Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))


class BertModel(nn.Module):
    """Embeddings, encoder and (optionally) the [CLS] pooler; returns (sequence, pooled)."""

    def __init__(self, c: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = BertEncoder(c)
        self.pooler = BertPooler(c) if add_pooling_layer else None

    def forward(
        self, input_ids: Tensor, token_type_ids: Tensor | None = None, attention_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        mask = None
        if attention_mask is not None:
            # (N, T) 1 = attend, 0 = padding -> boolean (N, 1, 1, T) mask for SDPA
            mask = attention_mask.bool()[:, None, None, :]
        hidden = self.encoder(self.embeddings(input_ids, token_type_ids), mask)
        return hidden, (self.pooler(hidden) if self.pooler is not None else None)


def init_bert_weights(module: nn.Module, std: float = 0.02) -> None:
    """BERT's initialisation: N(0, 0.02) weights, zero biases, unit LayerNorm."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, std)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class BertForQuestionAnswering(nn.Module):
    """SQuAD span extraction: per-token start and end logits from the last hidden states."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.bert = BertModel(c, add_pooling_layer=False)  # as transformers: QA has no pooler
        self.qa_outputs = nn.Linear(c.hidden, 2)
        init_bert_weights(self)

    def forward(
        self, input_ids: Tensor, token_type_ids: Tensor | None = None, attention_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        hidden, _ = self.bert(input_ids, token_type_ids, attention_mask)
        start, end = self.qa_outputs(hidden).split(1, dim=-1)
        return start.squeeze(-1), end.squeeze(-1)


class BertForSequenceClassification(nn.Module):
    """Classifier on the pooled [CLS] output (keeps the full BertModel, pooler included)."""

    def __init__(self, c: BertConfig, num_labels: int = 2) -> None:
        super().__init__()
        self.bert = BertModel(c, add_pooling_layer=True)
        self.dropout = nn.Dropout(c.dropout)
        self.classifier = nn.Linear(c.hidden, num_labels)
        init_bert_weights(self)

    def forward(
        self, input_ids: Tensor, token_type_ids: Tensor | None = None, attention_mask: Tensor | None = None
    ) -> Tensor:
        _, pooled = self.bert(input_ids, token_type_ids, attention_mask)
        assert pooled is not None
        return self.classifier(self.dropout(pooled))


def _make_model(c: BertConfig) -> Callable[[Options], nn.Module]:
    def make(options: Options) -> nn.Module:
        if options["head"] == "qa":
            return BertForQuestionAnswering(c)
        return BertForSequenceClassification(c)

    return make


def _batch(
    factory: BatchFactory, batch_size: int, options: Options
) -> tuple[dict[str, Tensor], Tensor | tuple[Tensor, Tensor]]:
    t = options["seq_len"]
    input_ids = factory.randint(0, BERT_BASE.vocab_size, (batch_size, t))
    if factory.meta:
        token_type_ids = factory.empty((batch_size, t), torch.int64)
    else:
        # SQuAD packs "[CLS] question [SEP] context [SEP]": segment 0 then segment 1
        question = max(1, min(t // 6, 64))
        tt = torch.zeros((batch_size, t), dtype=torch.int64)
        tt[:, question:] = 1
        token_type_ids = factory.cpu_tensor(tt)
    inputs = {"input_ids": input_ids, "token_type_ids": token_type_ids}
    if options["head"] == "qa":
        return inputs, (factory.randint(0, t, (batch_size,)), factory.randint(0, t, (batch_size,)))
    return inputs, factory.randint(0, 2, (batch_size,))


def _loss(options: Options) -> LossFn:
    if options["head"] == "qa":

        def span_loss(output: tuple[Tensor, Tensor], targets: tuple[Tensor, Tensor]) -> Tensor:
            # transformers' BertForQuestionAnswering: mean of start and end cross-entropies
            start_logits, end_logits = output
            start, end = targets
            return (F.cross_entropy(start_logits, start) + F.cross_entropy(end_logits, end)) / 2

        return span_loss

    def ce(output: Tensor, targets: Tensor) -> Tensor:
        return F.cross_entropy(output, targets)

    return ce


def _validate(options: Options) -> None:
    check_range("seq_len", options["seq_len"], 2, 512)
    check_choice("head", options["head"], HEADS)


def _entry(name: str, c: BertConfig, backbone: int, qa: int, cls: int, label: str) -> ZooEntry:
    return ZooEntry(
        name=name,
        family="bert",
        params=qa,
        params_source=(
            f"transformers BertForQuestionAnswering on {label}: {qa:,} "
            f"(= BertModel with pooler, {backbone:,}, minus the pooler plus qa_outputs)"
        ),
        source=f"Devlin et al., NAACL 2019; Hugging Face transformers BertModel layout ({label})",
        task="extractive question answering (SQuAD v1.1 fine-tuning)",
        sample_unit="sequences",
        loss="span cross-entropy (mean of start and end)",
        defaults={"seq_len": 384, "head": "qa"},
        make_model=_make_model(c),
        make_batch=_batch,
        make_loss=_loss,
        input_shape=lambda o: (o["seq_len"],),
        validate=_validate,
        notes=(
            "options: seq_len (<= 512, default 384 as in BERT's SQuAD runs); head 'qa' (default) or "
            "'classification' (BertForSequenceClassification, 2 labels, keeps the pooler)"
        ),
        extra={
            "bert_model_params": backbone,
            "classification_params": cls,
            "hidden": c.hidden,
            "layers": c.layers,
            "heads": c.heads,
        },
    )


bert_base = _entry("bert_base", BERT_BASE, 109_482_240, 108_893_186, 109_483_778, "bert-base-uncased")
bert_large = _entry("bert_large", BERT_LARGE, 335_141_888, 334_094_338, 335_143_938, "bert-large-uncased")

ENTRIES: tuple[ZooEntry, ...] = (bert_base, bert_large)
