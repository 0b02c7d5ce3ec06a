"""NeuCodec (the NeuTTS codec) through transformers' `NeuCodecModel`, as a windowed codec.

NeuCodec has one FSQ codebook of 65,536 codes at 50 frames/s. Its encoder
takes 16 kHz audio (a wav2vec2-BERT semantic branch on log-mel features
plus a convolutional acoustic branch); its decoder is a non-causal
transformer followed by an iSTFT head and writes 24 kHz audio, 480
samples per frame. Because the decoder attends over the whole window,
streaming decodes windows with look-back and look-ahead context and
cross-fades the chunk boundaries (see omnicli.engine.windowed).

The checkpoint folder is what `NeuCodecModel.save_pretrained` writes
(config.json + model.safetensors).

Encoder inputs: transformers' `NeuCodecFeatureExtractor` computes the
semantic branch's log-mel features with torchaudio, which cannot be loaded
beside this torch build. We compute the same Kaldi-style 80-bin log-mel
features (povey window, pre-emphasis 0.97, per-bin mean/variance
normalisation, frames stacked in pairs) with transformers' numpy
w2v-BERT (SeamlessM4T) feature extractor, on the same padded waveform
(one zero sample, then zeros up to a multiple of the 320-sample hop).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from omnicli.engine.windowed import WindowCodec

if TYPE_CHECKING:
    from transformers import NeuCodecModel

CONFIG_FILE = "config.json"
WEIGHTS_FILES = ("model.safetensors",)


def load_neucodec(folder: Path, *, dtype: str = "float32") -> tuple[NeuCodecModel, EncoderFeatures]:
    """(model, feature function) from a folder in transformers' NeuCodec layout."""
    from transformers import NeuCodecModel

    from omnicli.model_files import refuse_remote_code

    refuse_remote_code(folder)  # and trust_remote_code=False: transformers never runs the folder's code
    model = NeuCodecModel.from_pretrained(
        str(folder), dtype=getattr(torch, dtype), local_files_only=True, trust_remote_code=False).eval()
    return model, EncoderFeatures(model.config.input_sampling_rate, model.config.encoder_hop_length)


class EncoderFeatures:
    """16 kHz PCM (1-D) -> the encoder's inputs: padded waveform and stacked log-mel features."""

    def __init__(self, sample_rate: int = 16000, hop: int = 320):
        from transformers import SeamlessM4TFeatureExtractor

        self.sample_rate, self.hop = sample_rate, hop
        self._mel = SeamlessM4TFeatureExtractor(
            feature_size=80, num_mel_bins=80, sampling_rate=sample_rate, stride=2, padding_value=1.0
        )

    def __call__(self, pcm: np.ndarray) -> dict[str, torch.Tensor]:
        wav = np.pad(np.asarray(pcm, np.float32), (0, 1))
        wav = np.pad(wav, (0, -len(wav) % self.hop))
        mel = self._mel(wav, sampling_rate=self.sample_rate, return_tensors="pt", return_attention_mask=True)
        return {"input_values": torch.from_numpy(wav)[None, None], "input_features": mel["input_features"],
                "input_features_mask": mel["attention_mask"]}


class NeuCodecReferenceEncoder(nn.Module):
    """Reference PCM (16 kHz, 1-D) -> codes (n, 1); what the engine's reference cache calls."""

    def __init__(self, model: NeuCodecModel, features: EncoderFeatures):
        super().__init__()
        self.model = model
        self.features = features

    def forward(self, pcm: torch.Tensor) -> torch.Tensor:
        inputs = self.features(pcm.float().cpu().numpy())
        param = next(self.model.parameters())
        inputs = {k: v.to(param.device, param.dtype if v.is_floating_point() else v.dtype) for k, v in inputs.items()}
        codes = self.model.encode(**inputs).audio_codes  # (1, 1, n)
        return codes[0].transpose(0, 1).long()  # (n, 1)


class NeuCodecCodec(WindowCodec):
    """The windowed-codec face of NeuCodec for the engine's WindowedRunner."""

    num_codebooks = 1
    encoder: NeuCodecReferenceEncoder

    def __init__(self, model: NeuCodecModel, features: EncoderFeatures, *, lookback: int, lookahead: int, overlap: int):
        super().__init__()
        self.model = model
        self.encoder = NeuCodecReferenceEncoder(model, features)
        self.sample_rate = int(model.config.output_sampling_rate)
        self.input_sample_rate = int(model.config.input_sampling_rate)
        self.hop = int(model.config.hop_length)  # output samples per frame (480 at 24 kHz)
        self.lookback, self.lookahead, self.overlap = lookback, lookahead, overlap

    def decode_frames(self, codes: torch.Tensor) -> torch.Tensor:
        """(B, n, 1) codes -> (B, n * hop) PCM."""
        audio = self.model.decode(audio_codes=codes.long().transpose(1, 2)).audio_values  # (B, 1, T)
        return audio[:, 0, : codes.shape[1] * self.hop]

    def encode_frames(self, pcm16k: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.encoder(torch.from_numpy(np.asarray(pcm16k, np.float32))).cpu().numpy()
