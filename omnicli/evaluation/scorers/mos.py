"""Predicted naturalness / quality (MOS) of generated speech, no reference needed.

Backends (`--mos BACKEND[:MODEL][,BACKEND...]`), all offline:

    dnsmos    Microsoft DNSMOS (SIG/BAK/OVRL + P.808), ONNX bundled in `speechmos` (default)
    utmos[:/path/utmos.ts]
              a TorchScript UTMOS predictor (16 kHz wave [B, T] -> score [B]) from a local file,
              default $OMNI_CACHE_DIR/models/utmos/utmos22_strong.ts; loaded only when the user
              trusts it (`omni eval --trust-torchscript`): a TorchScript file is a program
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from omnicli.evaluation.scorers.base import SAMPLE_RATE, ScoreItem, Scorer, ScorerError, ScorerSetupError

MOS_BACKENDS = ("dnsmos", "utmos")
DNSMOS_KEYS = ("dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak", "dnsmos_p808")

# DNSMOS judges 9.01 s windows moved by 1 s and averages them (the published scoring recipe).
_WINDOW = int(9.01 * SAMPLE_RATE)
_HOP = SAMPLE_RATE
# ONNX holds ~115 MB of activations per window in a call: at most this many per call bounds a
# scorer's memory (~550 MB) whatever the batch or clip length (was: every window of a batch at once).
WINDOWS_PER_CALL = 4
MIN_MOS_SECONDS = 0.5  # a shorter clip (a click, one sample) gets a reason, not a MOS
# Third-order fits that map the SIG/BAK/OVRL network outputs onto the MOS scale (non-personalised model).
_POLY_SIG = np.poly1d([-0.08397278, 1.22083953, 0.0052439])
_POLY_BAK = np.poly1d([-0.13166888, 1.60915514, -0.39604546])
_POLY_OVR = np.poly1d([-0.06766283, 1.11546468, 0.04602535])


def dnsmos_windows(clip: np.ndarray) -> list[np.ndarray]:
    """The 9.01 s windows DNSMOS scores; short clips are repeated (doubled) to fill one."""
    audio = np.clip(np.asarray(clip, dtype=np.float32), -1.0, 1.0)
    if audio.shape[0] == 0:
        raise ScorerError("no samples to score")
    while audio.shape[0] < _WINDOW:
        audio = np.concatenate([audio, audio])
    count = int(np.floor(audio.shape[0] / SAMPLE_RATE) - 9.01) + 1
    windows = [audio[i * _HOP: i * _HOP + _WINDOW] for i in range(max(count, 1))]
    return [w for w in windows if w.shape[0] == _WINDOW]


class DnsmosScorer(Scorer):
    metric = "mos"
    backend = "dnsmos"
    keys = DNSMOS_KEYS
    min_seconds = MIN_MOS_SECONDS

    def __init__(self, threads: int | None = None):
        try:
            import librosa
            import onnxruntime as ort
            import speechmos
        except ImportError as exc:
            raise ScorerSetupError(
                f"the dnsmos MOS backend needs speechmos, onnxruntime and librosa ({exc}); install omnicli's eval "
                "extra (scripts/setup.sh does)"
            ) from None
        models = Path(speechmos.__file__).parent / "dnsmos_models"
        self.primary_path = models / "sig_bak_ovr.onnx"
        self.p808_path = models / "model_v8.onnx"
        for path in (self.primary_path, self.p808_path):
            if not path.is_file():
                raise ScorerSetupError(f"DNSMOS model {path} is missing from the speechmos package (reinstall it)")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy-waiting on shared CPUs
        # Sessions are built once here; speechmos.dnsmos.run would rebuild them on every call.
        self._primary = ort.InferenceSession(str(self.primary_path), options, providers=["CPUExecutionProvider"])
        self._p808 = ort.InferenceSession(str(self.p808_path), options, providers=["CPUExecutionProvider"])
        self._librosa = librosa

    def _p808_features(self, window: np.ndarray) -> np.ndarray:
        mel = self._librosa.feature.melspectrogram(
            y=window[:-160], sr=SAMPLE_RATE, n_fft=321, hop_length=160, n_mels=120
        )
        return ((self._librosa.power_to_db(mel, ref=np.max) + 40) / 40).T.astype(np.float32)

    def score(self, items: Sequence[ScoreItem]) -> list[dict[str, float]]:
        per_item = [dnsmos_windows(item.clip) for item in items]
        windows = [w for ws in per_item for w in ws]
        raw_parts, p808_parts = [], []
        for start in range(0, len(windows), WINDOWS_PER_CALL):
            part = windows[start:start + WINDOWS_PER_CALL]
            raw_parts.append(self._primary.run(None, {"input_1": np.stack(part)})[0])
            features = np.stack([self._p808_features(w) for w in part])
            p808_parts.append(self._p808.run(None, {"input_1": features})[0][:, 0])
        raw, p808 = np.concatenate(raw_parts), np.concatenate(p808_parts)
        out: list[dict[str, float]] = []
        start = 0
        for ws in per_item:
            rows = slice(start, start + len(ws))
            start += len(ws)
            sig, bak, ovr = raw[rows, 0], raw[rows, 1], raw[rows, 2]
            out.append({
                "dnsmos_ovrl": round(float(np.mean(_POLY_OVR(ovr))), 4),
                "dnsmos_sig": round(float(np.mean(_POLY_SIG(sig))), 4),
                "dnsmos_bak": round(float(np.mean(_POLY_BAK(bak))), 4),
                "dnsmos_p808": round(float(np.mean(p808[rows])), 4),
            })
        return out

    def _warm_up(self, clip: np.ndarray) -> None:
        self.score([ScoreItem("warm-up", np.resize(clip, _WINDOW))])  # one window (a short clip is repeated to 7)

    def describe(self) -> dict:
        return {
            "backend": "dnsmos",
            "model": f"speechmos DNSMOS ({self.primary_path.name}, {self.p808_path.name}), non-personalised",
            "comparable_to": "Microsoft DNSMOS P.835 (SIG/BAK/OVRL) and P.808 as in the DNS Challenge; NOT UTMOS "
            "(the figure vLLM-Omni reports) and not listener MOS",
        }


def default_utmos_path() -> Path:
    from omnicli.runtime.cache import cache_dir

    return cache_dir() / "models" / "utmos" / "utmos22_strong.ts"


def locate_utmos(model: str | None, *, trusted: bool = False) -> Path:
    """The UTMOS file, when present and trusted (ScorerSetupError otherwise, before anything loads it)."""
    path = Path(model).expanduser() if model else default_utmos_path()
    if path.is_dir():
        raise ScorerSetupError(f"the utmos backend needs a TorchScript file, but {path} is a folder")
    if path.is_file():
        if not trusted:
            # No digest of a UTMOS export is published anywhere to check a file against, so
            # only the user can vouch for one: TorchScript runs code (torch.from_file writes
            # files) when loaded and when scoring.
            raise ScorerSetupError(
                f"refusing to load {path}: a TorchScript file is a program that runs when loaded and when "
                "scoring (it can read and write files on this machine), and no digest is published to check "
                "it against. If you exported it yourself or trust where it came from, pass "
                "--trust-torchscript to omni eval (docs/eval.md)"
            )
        return path
    raise ScorerSetupError(
        f"UTMOS model not on this machine: looked for {path} (offline, nothing is downloaded). UTMOS weights ship "
        "with no package; on a connected machine export the predictor to TorchScript as docs/eval.md shows, copy "
        f"the file to {default_utmos_path()} (or set OMNI_CACHE_DIR), or pass --mos utmos:/path/to/utmos.ts"
    )


class UtmosScorer(Scorer):
    metric = "mos"
    backend = "utmos"
    keys = ("utmos",)
    min_seconds = MIN_MOS_SECONDS

    def __init__(self, path: Path, device: str = "cpu"):
        import torch

        try:
            self._module = torch.jit.load(str(path), map_location=device).eval()
        except Exception as exc:
            raise ScorerError(f"cannot load a TorchScript UTMOS predictor from {path}: {exc}") from None
        self._torch = torch
        self.device = device
        self.path = path
        self.sha256 = hashlib.sha256(path.read_bytes()).hexdigest()  # which file ran, in the summary

    def score(self, items: Sequence[ScoreItem]) -> list[dict[str, float]]:
        out = []
        # One clip per call: zero padding would change the prediction of the shorter clips.
        for item in items:
            wave = self._torch.from_numpy(np.clip(np.asarray(item.clip, dtype=np.float32), -1, 1))[None].to(self.device)
            with self._torch.inference_mode():
                value = self._module(wave).reshape(-1)
            if value.numel() != 1:
                raise ScorerError(f"UTMOS predictor returned {value.numel()} values for one clip")
            out.append({"utmos": round(float(value[0]), 4)})
        return out

    def describe(self) -> dict:
        return {
            "backend": "utmos",
            "model": f"{self.path} (sha256 {self.sha256}, trusted by --trust-torchscript)",
            "comparable_to": "UTMOS (VoiceMOS 2022 strong learner) as vLLM-Omni's benchmark reports it, when the "
            "file is an export of that checkpoint; NOT DNSMOS",
        }


def parse_mos_specs(text: str) -> list[tuple[str, str | None]]:
    """`dnsmos`, `utmos[:PATH]`, or several joined by ','."""
    specs: list[tuple[str, str | None]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        backend, sep, model = part.partition(":")
        backend = backend.strip().lower()
        if backend not in MOS_BACKENDS:
            raise ScorerSetupError(
                f"unknown MOS backend {backend!r} in --mos {text!r} (expected one of {', '.join(MOS_BACKENDS)})")
        if sep and not model.strip():
            raise ScorerSetupError(f"--mos {text!r} names no model after ':'")
        if backend == "dnsmos" and model.strip():
            raise ScorerSetupError("the dnsmos backend uses the models bundled in speechmos; it takes no MODEL")
        if backend in (b for b, _ in specs):
            raise ScorerSetupError(f"--mos {text!r} names {backend} twice")
        specs.append((backend, model.strip() or None))
    if not specs:
        raise ScorerSetupError("--mos names no backend")
    return specs


def load_mos(text: str, device: str = "cpu", *, trust_torchscript: bool = False) -> list[Scorer]:
    """Locates every backend first (so a missing or untrusted UTMOS fails before DNSMOS loads), then loads each once."""
    specs = parse_mos_specs(text)
    paths = {backend: locate_utmos(model, trusted=trust_torchscript) for backend, model in specs if backend == "utmos"}
    return [DnsmosScorer() if backend == "dnsmos" else UtmosScorer(paths["utmos"], device) for backend, _ in specs]
