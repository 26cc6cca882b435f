"""DeepSpeech2 as in SeanNaren/deepspeech.pytorch (V3 defaults), trained with CTC.

Amodei et al., "Deep Speech 2: End-to-End Speech Recognition in English and Mandarin", ICML
2016. Architecture of ``deepspeech_pytorch/model.py`` with its default ``BiDirectionalConfig``
(LSTM, hidden 1024, 5 layers) and ``SpectConfig`` (16 kHz, 20 ms window, 10 ms stride -> 161
frequency bins), English ``labels.json`` (29 symbols, blank "_" first):

- conv: Conv2d(1, 32, (41, 11), stride (2, 2)) + BN + Hardtanh(0, 20), Conv2d(32, 32, (21, 11),
  stride (2, 1)) + BN + Hardtanh: 251,168 parameters;
- rnns: 5 bidirectional LSTM(1024) with directions summed; the first takes 32 * 41 = 1312
  features and has no input BN, the other four have BatchNorm1d(1024): 86,335,488;
- fc: BatchNorm1d(1024) + Linear(1024, 29, bias=False): 31,744.

Total 86,618,400 (computed from that source; the repository does not print a count).
Every utterance in the example batch has the same length, so the reference's MaskConv and
packed sequences would be no-ops; they are left out.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from srift.zoo._common import BatchFactory, LossFn, Options, ZooEntry, check_range

__all__ = ["ENTRIES", "BatchRNN", "DeepSpeech2", "SequenceWise", "deepspeech2"]

SAMPLE_RATE = 16_000
WINDOW_S = 0.02
STRIDE_S = 0.01
NUM_CLASSES = 29  # "_'ABCDEFGHIJKLMNOPQRSTUVWXYZ " with the CTC blank at index 0
FREQ_BINS = int(math.floor(SAMPLE_RATE * WINDOW_S / 2) + 1)  # 161
CHARS_PER_SECOND = 15.0  # LibriSpeech read speech is ~14-16 characters a second


class SequenceWise(nn.Module):
    """Applies a module to (T, N, H) input as (T*N, H)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: Tensor) -> Tensor:
        t, n = x.shape[0], x.shape[1]
        return self.module(x.reshape(t * n, -1)).view(t, n, -1)


class BatchRNN(nn.Module):
    """Optional sequence-wise BN, then a bidirectional LSTM whose two directions are summed."""

    def __init__(self, input_size: int, hidden_size: int, batch_norm: bool = True) -> None:
        super().__init__()
        self.batch_norm = SequenceWise(nn.BatchNorm1d(input_size)) if batch_norm else None
        self.rnn = nn.LSTM(input_size=input_size, hidden_size=hidden_size, bidirectional=True, bias=True)

    def forward(self, x: Tensor) -> Tensor:
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        x, _ = self.rnn(x)
        t, n, _ = x.shape
        return x.view(t, n, 2, -1).sum(2)


class DeepSpeech2(nn.Module):
    """Spectrogram (N, 1, 161, T) -> per-frame character logits (N, T', 29), T' = ceil(T/2)."""

    def __init__(self, hidden_size: int = 1024, hidden_layers: int = 5, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, kernel_size=(41, 11), stride=(2, 2), padding=(20, 5)),
            nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(32, 32, kernel_size=(21, 11), stride=(2, 1), padding=(10, 5)),
            nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20, inplace=True),
        )
        rnn_input = FREQ_BINS
        rnn_input = (rnn_input + 2 * 20 - 41) // 2 + 1
        rnn_input = (rnn_input + 2 * 10 - 21) // 2 + 1
        rnn_input *= 32
        self.rnns = nn.Sequential(
            BatchRNN(rnn_input, hidden_size, batch_norm=False),
            *(BatchRNN(hidden_size, hidden_size) for _ in range(hidden_layers - 1)),
        )
        self.fc = nn.Sequential(
            SequenceWise(
                nn.Sequential(nn.BatchNorm1d(hidden_size), nn.Linear(hidden_size, num_classes, bias=False))
            )
        )

    def forward(self, spect: Tensor) -> Tensor:
        x = self.conv(spect)
        n, c, f, t = x.shape
        x = x.view(n, c * f, t).permute(2, 0, 1).contiguous()  # (T', N, H)
        x = self.rnns(x)
        return self.fc(x).transpose(0, 1)


def output_frames(frames: int) -> int:
    """Time steps after the conv stack (only the first conv strides in time)."""
    return (frames + 2 * 5 - 11) // 2 + 1


def _frames(options: Options) -> int:
    return max(1, int(round(options["audio_seconds"] / STRIDE_S)))


def _batch(factory: BatchFactory, batch_size: int, options: Options) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    frames = _frames(options)
    spect = factory.randn((batch_size, 1, FREQ_BINS, frames))
    # transcripts short enough for CTC (room for blanks between repeated letters)
    length = max(1, min(int(options["audio_seconds"] * CHARS_PER_SECOND), output_frames(frames) // 2))
    labels = factory.randint(1, NUM_CLASSES, (batch_size, length))
    return spect, (labels, factory.full((batch_size,), length))


def ctc_loss(output: Tensor, targets: tuple[Tensor, Tensor]) -> Tensor:
    """CTC over the full-length outputs, summed per utterance and averaged over the batch."""
    labels, label_lengths = targets
    n, t, _ = output.shape
    log_probs = F.log_softmax(output, dim=-1).transpose(0, 1)  # (T, N, C)
    if log_probs.device.type == "meta":
        # aten::_ctc_loss has no meta kernel; a scalar that still depends on every log-prob
        # keeps shape analysis and backward working (CTC itself is a tiny share of the step)
        return log_probs.sum() * 0.0
    input_lengths = torch.full((n,), t, dtype=torch.int64, device=output.device)
    loss = F.ctc_loss(
        log_probs, labels, input_lengths, label_lengths, blank=0, reduction="sum", zero_infinity=True
    )
    return loss / n


def _loss(options: Options) -> LossFn:
    return ctc_loss


def _validate(options: Options) -> None:
    check_range("audio_seconds", options["audio_seconds"], 0.1, 60.0)


deepspeech2 = ZooEntry(
    name="deepspeech2",
    family="deepspeech",
    params=86_618_400,
    params_source=(
        "computed from SeanNaren/deepspeech.pytorch deepspeech_pytorch/model.py with its default "
        "BiDirectionalConfig (LSTM, 1024 hidden, 5 layers), 161 bins, 29 labels: 86,618,400"
    ),
    source="Amodei et al., ICML 2016; github.com/SeanNaren/deepspeech.pytorch (V3 defaults)",
    task="speech recognition (LibriSpeech-style character CTC)",
    sample_unit="utterances",
    loss="CTC (blank 0), summed per utterance, mean over the batch",
    defaults={"audio_seconds": 2.0},
    make_model=lambda o: DeepSpeech2(),
    make_batch=_batch,
    make_loss=_loss,
    input_shape=lambda o: (1, FREQ_BINS, _frames(o)),
    validate=_validate,
    notes=(
        "option audio_seconds (default 2.0, short for quick profiling; LibriSpeech utterances "
        "average ~12 s and LSTM time grows linearly with it)"
    ),
)

ENTRIES: tuple[ZooEntry, ...] = (deepspeech2,)
