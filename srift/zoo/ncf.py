"""NeuMF (Neural Collaborative Filtering) as in the MLPerf NCF reference on MovieLens-20M.

He et al., "Neural Collaborative Filtering", WWW 2017. Configuration of the MLPerf training
reference (mlcommons/training recommendation/pytorch, run_and_time.sh of v0.5):
``ncf.py ml-20m -b 2048 --layers 256 256 128 64 -f 64``; ml-20m has 138,493 users and 26,744
rated movies. Parameters: embeddings (138,493 + 26,744) x (64 + 128) = 31,725,504, MLP
256-256-128-64 = 106,944, final 128 -> 1 = 129; total 31,832,577.

Option ``dataset="ml-1m"`` builds the NCF paper's configuration as the PyTorch port that
AdaptDL/Pollux/Sia train (guoyang9/NCF: factor_num 32, num_layers 3, NeuMF-end) on
MovieLens-1M as hexiangnan/neural_collaborative_filtering ships it (6,040 users, 3,706 items):
embeddings (6,040 + 3,706) x (32 + 128) = 1,559,360, MLP 256-128-64-32 = 43,232, final
64 -> 1 = 65; total 1,602,657. The same model family, 20x fewer parameters to all-reduce.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from srift.zoo._common import BatchFactory, LossFn, Options, ZooEntry, check_choice

__all__ = ["DATASETS", "ENTRIES", "ML20M_ITEMS", "ML20M_USERS", "NeuMF", "ncf"]

ML20M_USERS = 138_493
ML20M_ITEMS = 26_744
# dataset -> (users, items, GMF factors, MLP layer sizes)
DATASETS: dict[str, tuple[int, int, int, tuple[int, ...]]] = {
    "ml-20m": (ML20M_USERS, ML20M_ITEMS, 64, (256, 256, 128, 64)),  # MLPerf reference
    "ml-1m": (6_040, 3_706, 32, (256, 128, 64, 32)),                 # NCF paper / AdaptDL example
}


class NeuMF(nn.Module):
    """GMF and MLP towers with separate embeddings, concatenated into one logit."""

    def __init__(
        self,
        nb_users: int = ML20M_USERS,
        nb_items: int = ML20M_ITEMS,
        mf_dim: int = 64,
        mlp_layer_sizes: tuple[int, ...] = (256, 256, 128, 64),
    ) -> None:
        super().__init__()
        # registered in the order the forward touches them (GMF tower first)
        self.mf_user_embed = nn.Embedding(nb_users, mf_dim)
        self.mf_item_embed = nn.Embedding(nb_items, mf_dim)
        self.mlp_user_embed = nn.Embedding(nb_users, mlp_layer_sizes[0] // 2)
        self.mlp_item_embed = nn.Embedding(nb_items, mlp_layer_sizes[0] // 2)
        self.mlp = nn.ModuleList(
            nn.Linear(mlp_layer_sizes[i - 1], mlp_layer_sizes[i]) for i in range(1, len(mlp_layer_sizes))
        )
        self.final = nn.Linear(mlp_layer_sizes[-1] + mf_dim, 1)
        # the reference initialisation: N(0, 0.01) embeddings, Glorot MLP, LeCun final layer
        for emb in (self.mf_user_embed, self.mf_item_embed, self.mlp_user_embed, self.mlp_item_embed):
            nn.init.normal_(emb.weight, 0.0, 0.01)
        for layer in self.mlp:
            nn.init.xavier_uniform_(layer.weight)
        limit = math.sqrt(3.0 / self.final.in_features)
        nn.init.uniform_(self.final.weight, -limit, limit)

    def forward(self, user: Tensor, item: Tensor) -> Tensor:
        xmf = self.mf_user_embed(user) * self.mf_item_embed(item)
        xmlp = torch.cat((self.mlp_user_embed(user), self.mlp_item_embed(item)), dim=1)
        for layer in self.mlp:
            xmlp = F.relu(layer(xmlp))
        return self.final(torch.cat((xmf, xmlp), dim=1))


def _model(options: Options) -> NeuMF:
    users, items, factors, layers = DATASETS[options["dataset"]]
    return NeuMF(users, items, factors, layers)


def _validate(options: Options) -> None:
    check_choice("dataset", options["dataset"], tuple(DATASETS))


def _batch(factory: BatchFactory, batch_size: int, options: Options) -> tuple[tuple[Tensor, Tensor], Tensor]:
    n_users, n_items = DATASETS[options["dataset"]][:2]
    users = factory.randint(0, n_users, (batch_size,))
    items = factory.randint(0, n_items, (batch_size,))
    # one positive per four sampled negatives, as in the reference's training set
    draw = factory.rand((batch_size, 1))
    labels = draw if factory.meta else (draw < 0.2).float()
    return (users, items), labels


def _loss(options: Options) -> LossFn:
    def loss_fn(output: Tensor, targets: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(output, targets)

    return loss_fn


ncf = ZooEntry(
    name="ncf",
    family="ncf",
    params=31_832_577,
    params_source=(
        "computed for the MLPerf NCF reference config (ml-20m: 138,493 users, 26,744 items; "
        "factors 64, layers 256-256-128-64): 31,832,577"
    ),
    source=(
        "He et al., WWW 2017; MLPerf training v0.5 reference "
        "(mlcommons/training recommendation/pytorch/neumf.py)"
    ),
    task="recommendation (implicit feedback, MovieLens-20M)",
    sample_unit="samples",
    loss="binary cross-entropy with logits",
    defaults={"dataset": "ml-20m"},
    make_model=_model,
    make_batch=_batch,
    make_loss=_loss,
    input_shape=lambda o: (2,),
    validate=_validate,
    notes=("option dataset: ml-20m (MLPerf, default) or ml-1m (NCF paper / AdaptDL, 1,602,657 parameters); "
           "inputs are (user ids, item ids), each of shape (N,); one sample is one user-item pair"),
)

ENTRIES: tuple[ZooEntry, ...] = (ncf,)
