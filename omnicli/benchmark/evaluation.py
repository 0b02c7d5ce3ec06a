"""`omni bench --eval wer,sim,mos`: score the benchmark's own audio after the passes.

Like vLLM-Omni's `--seed-tts-wer-eval`, but offline and with SIM / MOS too.
`BenchEval.check` parses the metrics and locates every model before the
engine starts (a missing model is a usage error, not a wasted benchmark);
`score_pass` runs `omni eval`'s library on one pass's `--audio-out` folder,
writes the same eval_results / eval_summary files into `<folder>/eval` and
returns the figures that go into the pass's entry of the result file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnicli.benchmark.result_models import EVAL_RESULT_KEYS
from omnicli.manifest import ManifestRow


@dataclass
class BenchEval:
    metrics: tuple[str, ...]
    asr: str | None = None  # ASR spec for WER (None: the language's default)
    sim: str = "dvector"
    mos: str = "dnsmos"
    lang: str = "en"
    device: str = "cpu"
    _plan: Any = field(default=None, repr=False)

    @classmethod
    def parse(cls, text: str, **kwargs) -> BenchEval:
        """ValueError for an unknown metric."""
        from omnicli.evaluation.combined import parse_metrics

        return cls(parse_metrics(text), **kwargs)

    def check(self) -> None:
        """Locates every model without loading it; AsrSetupError / ScorerSetupError when one is absent."""
        from omnicli.evaluation.asr import AsrSpec, default_spec
        from omnicli.evaluation.scorers import check_specs

        check_specs(self.metrics, sim=self.sim, mos=self.mos)
        if "wer" in self.metrics:
            spec = AsrSpec.parse(self.asr) if self.asr else default_spec(self.lang)
            spec.locate()

    def _load(self, retention: Any) -> Any:
        """Loads the models once, for every pass."""
        if self._plan is None:
            from omnicli.evaluation import AsrSpec, default_spec, load_backend
            from omnicli.evaluation.asr.base import resolve_torch_device
            from omnicli.evaluation.combined import EvalPlan
            from omnicli.evaluation.scorers import load_scorers

            plan = EvalPlan(metrics=self.metrics, lang=self.lang)
            if "wer" in self.metrics:
                spec = AsrSpec.parse(self.asr) if self.asr else default_spec(self.lang)
                plan.asr = load_backend(spec, lang=self.lang, device=self.device)
            if "sim" in self.metrics or "mos" in self.metrics:
                plan.scorers = load_scorers(self.metrics, sim=self.sim, mos=self.mos, device=resolve_torch_device(self.device))
            self._plan = plan
        if retention is not None:
            self._plan.wer_threshold = retention.asr_wer_threshold
            self._plan.sim_threshold = retention.sim_threshold
            self._plan.mos_threshold = retention.mos_threshold
        return self._plan

    def score_pass(self, audio_dir: Path, prompts: Sequence, resolved_profile: Any = None) -> dict:
        """Scores one pass's audio folder; returns the figures for its result entry."""
        from omnicli.evaluation import build_wer_summary
        from omnicli.evaluation.combined import build_eval_summary, columns, merge_rows, run_eval, write_eval_results
        from omnicli.evaluation.scorers import audio_summary

        retention = getattr(getattr(resolved_profile, "profile", None), "retention", None)
        plan = self._load(retention)
        rows = prompt_rows(prompts)
        outcome = run_eval(rows, audio_dir, plan)
        wer = None
        if outcome.wer_run is not None:
            wer = build_wer_summary(outcome.wer_run, lang=plan.lang, threshold=plan.wer_threshold,
                                asr={"requested": self.asr, **plan.asr.describe()}, gen_dir=audio_dir)
        audio = None
        if outcome.audio_run is not None:
            audio = audio_summary(outcome.audio_run, sim_threshold=plan.sim_threshold, mos_threshold=plan.mos_threshold)
        summary = build_eval_summary(
            outcome, metrics=self.metrics, wer_summary=wer, audio_summary=audio, gen_dir=audio_dir,
            profile_name=getattr(resolved_profile, "name", None), profile_digest=getattr(resolved_profile, "digest", None),
        )
        paths = write_eval_results(audio_dir / "eval", merge_rows(outcome), columns(outcome), summary)
        figures = {"metrics": list(self.metrics), **{k: summary[k] for k in EVAL_RESULT_KEYS if k in summary}}
        figures["summary_file"] = str(paths["summary"])
        return figures


def prompt_rows(prompts: Sequence) -> list[ManifestRow]:
    """One manifest row per distinct utterance (prompts cycle), in first-seen order."""
    rows: dict[str, ManifestRow] = {}
    for prompt in getattr(prompts, "distinct", prompts):  # a Cycled view: its distinct prompts
        if prompt.utt not in rows:
            reference = Path(prompt.reference) if prompt.reference else None
            rows[prompt.utt] = ManifestRow(utt=prompt.utt, text=prompt.request.text, prompt_wav=reference)
    return list(rows.values())
