"""The evaluation pipeline behind `omni eval`, `omni eval-wer` and `omni bench --eval`.

    evaluator = Evaluator(("wer", "mos"), asr="faster-whisper:tiny.en-bundled", device="cpu")
    evaluator.check()                      # locates every model, loads nothing (cheap; usage errors)
    evaluator.load()                       # once, however many folders are scored after
    report = evaluator.score(rows, "GEN")  # one loop: each wav decoded once, for every metric
    report.write("GEN/eval")               # eval_results.tsv / .jsonl, eval_summary.json, wav_res_ref_text.wer

`score` runs WER (ASR or cached transcripts), SIM and MOS as stages of one
pass over the rows (`omnicli.evaluation.loop`) and returns an `EvalReport`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from omnicli.errors import EngineFailure, UsageError
from omnicli.evaluation.eval_report import EvalOutcome, EvalReport, ResultFiles, RunContext, build_eval_summary
from omnicli.evaluation.loop import Stage, score_rows
from omnicli.evaluation.results import EvalStatus, WerResult
from omnicli.evaluation.scorers import DEFAULT_MOS, DEFAULT_SIM
from omnicli.evaluation.scorers.score_folder import AudioResult, AudioStage, audio_summary
from omnicli.evaluation.summaries import Metric
from omnicli.evaluation.wer_run import WerStage, build_wer_summary
from omnicli.manifest import ManifestRow
from omnicli.runtime.clock import utc_now

if TYPE_CHECKING:
    from omnicli.evaluation.asr import AsrBackend, AsrSpec
    from omnicli.evaluation.scorers import Scorer
    from omnicli.profile.schema import RetentionConfig

METRICS: tuple[Metric, ...] = ("wer", "sim", "mos")
WER_TASK, AUDIO_TASK = "wer", "audio"  # the progress tasks: WER, and SIM/MOS together


def parse_metrics(text: str) -> tuple[Metric, ...]:
    """`wer,sim,mos` (any subset, any order) -> the chosen metrics in canonical order (ValueError)."""
    chosen = {part.strip().lower() for part in text.split(",") if part.strip()}
    unknown = sorted(chosen - set(METRICS))
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(unknown)} (expected a subset of {','.join(METRICS)})")
    if not chosen:
        raise ValueError(f"no metric named (expected a subset of {','.join(METRICS)})")
    return tuple(m for m in METRICS if m in chosen)


@dataclass(frozen=True)
class Thresholds:
    """Retention thresholds: WER above `wer` (a fraction), SIM below `sim`, DNSMOS OVRL / UTMOS below `mos`."""

    wer: float = 0.5
    sim: float = 0.75
    mos: float = 3.0

    @classmethod
    def from_retention(
        cls, retention: RetentionConfig, *, wer: float | None = None, sim: float | None = None,
        mos: float | None = None,
    ) -> Thresholds:
        """The profile's `retention` thresholds, each overridden when given (the commands' options)."""
        return cls(
            wer=retention.asr_wer_threshold if wer is None else wer,
            sim=retention.sim_threshold if sim is None else sim,
            mos=retention.mos_threshold if mos is None else mos,
        )


class EvalModelError(EngineFailure):
    """A model was found but failed to load (exit 3)."""

    headline = "model failed to load"


class EvalObserver(Protocol):
    """What a caller sees of an evaluation: models loading, then each row scored."""

    def loading(self, what: str) -> AbstractContextManager[object]: ...

    def begin(self, tasks: Sequence[tuple[str, str]], total: int) -> None:
        """The progress tasks (key, description), each counting `total` rows."""

    def advance(self, task: str, scored: bool) -> None: ...


class _Silent:
    def loading(self, what: str) -> AbstractContextManager[object]:
        return contextlib.nullcontext()

    def begin(self, tasks: Sequence[tuple[str, str]], total: int) -> None:
        pass

    def advance(self, task: str, scored: bool) -> None:
        pass


class Evaluator:
    """The metrics, their models and options; `check` then `load` once, then `score` any number of folders."""

    def __init__(
        self, metrics: Sequence[str], *, lang: str = "en", asr: str | None = None, transcripts: Path | None = None,
        sim: str = DEFAULT_SIM, mos: str = DEFAULT_MOS, trust_torchscript: bool = False, device: str = "auto",
        max_new_tokens: int | None = None, batch_size: int = 8,
    ):
        self.metrics = parse_metrics(",".join(metrics))
        if transcripts is not None and "wer" not in self.metrics:
            raise UsageError("--transcripts only applies to the wer metric")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.lang, self.asr, self.transcripts = lang, asr, transcripts
        self.sim, self.mos, self.trust_torchscript = sim, mos, trust_torchscript
        self.device, self.max_new_tokens, self.batch_size = device, max_new_tokens, batch_size
        self.asr_info: dict[str, Any] | None = None  # the summary's `asr`, once loaded
        self._backend: AsrBackend | None = None
        self._cached: dict[str, str] | None = None
        self._scorers: list[Scorer] = []
        self._loaded = False

    @property
    def scores_audio(self) -> bool:
        """SIM or MOS runs (they need the wavs even when WER re-scores cached transcripts)."""
        return "sim" in self.metrics or "mos" in self.metrics

    def asr_spec(self) -> AsrSpec | None:
        """The ASR backend and model WER runs with (None with cached transcripts or without WER)."""
        from omnicli.evaluation.asr import AsrSpec, default_spec

        if "wer" not in self.metrics or self.transcripts is not None:
            return None
        return AsrSpec.parse(self.asr) if self.asr else default_spec(self.lang)

    def check(self) -> None:
        """Locates every model without loading it (AsrSetupError / ScorerSetupError: usage errors)."""
        from omnicli.evaluation.scorers import check_specs

        check_specs(self.metrics, sim=self.sim, mos=self.mos, trust_torchscript=self.trust_torchscript)
        spec = self.asr_spec()
        if spec is not None:
            spec.locate()

    def load(self, observer: EvalObserver | None = None) -> None:
        """Loads each model once (later calls return at once); EvalModelError when one fails to load."""
        from omnicli.evaluation.asr import AsrError, AsrSetupError, load_backend
        from omnicli.evaluation.asr.base import resolve_torch_device
        from omnicli.evaluation.scorers import ScorerError, ScorerSetupError, load_scorers
        from omnicli.evaluation.transcripts import read_transcripts

        if self._loaded:
            return
        seen = observer or _Silent()
        self.check()
        spec = self.asr_spec()
        try:
            if self.transcripts is not None:
                self._cached = read_transcripts(self.transcripts)  # TranscriptsError: a usage error
                self.asr_info = {"backend": "transcripts", "model": str(self.transcripts), "language": self.lang}
            elif spec is not None:
                with seen.loading(f"loading ASR {spec} ..."):
                    self._backend = load_backend(spec, lang=self.lang, device=self.device,
                                                 max_new_tokens=self.max_new_tokens)
                self.asr_info = {"requested": str(spec), **self._backend.describe()}
            if self.scores_audio:
                torch_device = resolve_torch_device(self.device)
                with seen.loading("loading SIM/MOS models ..."):
                    self._scorers = load_scorers(self.metrics, sim=self.sim, mos=self.mos, device=torch_device,
                                                 trust_torchscript=self.trust_torchscript)
        except (AsrSetupError, ScorerSetupError):
            raise  # usage errors (exit 2), not the load failures below
        except AsrError as exc:
            raise EvalModelError(f"ASR {spec}: {exc}") from None
        except ScorerError as exc:
            raise EvalModelError(f"SIM/MOS: {exc}") from None
        self._loaded = True

    def score(
        self, rows: Sequence[ManifestRow], folder: str | Path, *, thresholds: Thresholds | None = None,
        context: RunContext | None = None, command: str | None = None, observer: EvalObserver | None = None,
    ) -> EvalReport:
        """Scores GEN/<utt>.wav of every row with every metric in one pass (loading the models first if
        needed). `command` is recorded in retained files' JSON."""
        seen = observer or _Silent()
        self.load(seen)
        limits, facts, gen = thresholds or Thresholds(), context or RunContext(), Path(folder)
        meta: dict[str, Any] = {"profile_digest": facts.profile_digest, **({"command": command} if command else {})}
        if self.asr_info is not None:
            meta.update(asr_backend=self.asr_info["backend"], asr_model=self.asr_info["model"])
        started_at, t0 = utc_now(), time.perf_counter()
        wer, audio = self._stages(len(rows), limits, facts, meta, seen)
        stages: list[Stage] = [s for s in (wer, audio) if s is not None]
        seen.begin(self._tasks(), len(rows))
        score_rows(rows, gen, stages)
        wall = time.perf_counter() - t0
        outcome = EvalOutcome(wer.run(started_at, wall) if wer else None,
                              audio.run(started_at, wall) if audio else None, wall, started_at)
        return EvalReport(outcome, self._summary(outcome, gen, limits, facts))

    def _tasks(self) -> list[tuple[str, str]]:
        tasks = []
        if "wer" in self.metrics:
            tasks.append((WER_TASK, "scoring" if self.transcripts is not None else "transcribing"))
        if self.scores_audio:
            tasks.append((AUDIO_TASK, "+".join(m for m in self.metrics if m != "wer")))
        return tasks

    def _stages(
        self, count: int, limits: Thresholds, facts: RunContext, meta: dict[str, Any], seen: EvalObserver,
    ) -> tuple[WerStage | None, AudioStage | None]:
        wer = audio = None

        def wer_done(result: WerResult) -> None:
            seen.advance(WER_TASK, result.scored)

        def audio_done(result: AudioResult) -> None:
            seen.advance(AUDIO_TASK, result.status == EvalStatus.OK and not result.errors)

        if "wer" in self.metrics:
            wer = WerStage(count, lang=self.lang, backend=self._backend, transcripts=self._cached,
                           threshold=limits.wer, batch_size=self.batch_size, retainer=facts.retainer,
                           retention_meta=meta, on_result=wer_done)
        if self._scorers:
            audio = AudioStage(count, self._scorers, sim_threshold=limits.sim, mos_threshold=limits.mos,
                               batch_size=self.batch_size, retainer=facts.retainer, retention_meta=meta,
                               on_result=audio_done)
        return wer, audio

    def _summary(self, outcome: EvalOutcome, gen: Path, limits: Thresholds, facts: RunContext) -> dict[str, Any]:
        wer_summary = None
        if outcome.wer_run is not None:
            wer_summary = build_wer_summary(
                outcome.wer_run, lang=self.lang, threshold=limits.wer, asr=self.asr_info, manifest=facts.manifest,
                gen_dir=gen, transcripts_file=self.transcripts, profile_name=facts.profile_name,
                profile_digest=facts.profile_digest, retainer=facts.retainer,
            )
        audio = None
        if outcome.audio_run is not None:
            audio = audio_summary(outcome.audio_run, sim_threshold=limits.sim, mos_threshold=limits.mos)
        return build_eval_summary(outcome, metrics=self.metrics, wer_summary=wer_summary, audio_summary=audio,
                                  gen_dir=gen, context=facts)


class EvalManifestError(UsageError):
    """Rows of the manifest cannot be evaluated; the message lists them as file:line: reason."""

    message_below = True


def read_eval_rows(manifest: Path, shown: int = 20) -> list[ManifestRow]:
    """The manifest's rows for scoring: prompt audio is not needed, so it is neither checked nor confined to the
    manifest's folder, and seed-tts-eval's 2- and 3-field layouts are accepted. Any bad row is a usage error."""
    from omnicli.manifest import read_manifest

    parsed = read_manifest(manifest, allow_outside_paths=True, check_audio=False, short_layouts=True)
    if parsed.errors:
        lines = [f"manifest error: {error}" for error in parsed.errors[:shown]]
        if len(parsed.errors) > shown:
            lines.append(f"... and {len(parsed.errors) - shown} more")
        lines.append(f"{manifest}: {len(parsed.errors)} bad row(s); fix them to evaluate every utterance")
        raise EvalManifestError("\n".join(lines))
    if not parsed.rows:
        raise UsageError(f"{manifest}: no utterances")
    return parsed.rows


@dataclass
class EvalArgs:
    """What `omni eval` / `omni eval-wer` are asked, as data (the profile supplies what is left None)."""

    gen_dir: Path
    manifest: Path
    metrics: tuple[Metric, ...]
    files: ResultFiles
    command: str | None  # recorded in retained files' JSON (eval-wer's never named one)
    out: Path | None = None
    lang: str = "en"
    asr: str | None = None
    sim: str = DEFAULT_SIM
    mos: str = DEFAULT_MOS
    trust_torchscript: bool = False
    threshold: float | None = None
    sim_threshold: float | None = None
    mos_threshold: float | None = None
    transcripts: Path | None = None
    keep_failed: Path | None = None
    device: str | None = None
    batch_size: int = 8
    max_new_tokens: int | None = None

    @property
    def out_dir(self) -> Path:
        return self.out or self.gen_dir / self.files.default_dir

    def evaluator(self, profile_device: str) -> Evaluator:
        """The Evaluator these options name; UsageError when the generated-audio folder is needed and absent."""
        audio = "sim" in self.metrics or "mos" in self.metrics or self.transcripts is None
        if audio and not self.gen_dir.is_dir():
            raise UsageError(f"{self.gen_dir}: generated-audio folder not found")
        return Evaluator(
            self.metrics, lang=self.lang, asr=self.asr, transcripts=self.transcripts, sim=self.sim, mos=self.mos,
            trust_torchscript=self.trust_torchscript, device=self.device or profile_device,
            max_new_tokens=self.max_new_tokens, batch_size=self.batch_size,
        )

    def thresholds(self, retention: RetentionConfig) -> Thresholds:
        return Thresholds.from_retention(retention, wer=self.threshold, sim=self.sim_threshold, mos=self.mos_threshold)
