"""`omni bench --eval wer,sim,mos`: score the benchmark's own audio after the passes.

Like vLLM-Omni's `--seed-tts-wer-eval`, but offline and with SIM / MOS too.
`BenchEval.check` parses the metrics and locates every model before the
engine starts (a missing model is a usage error, not a wasted benchmark);
`score_pass` runs `omni eval`'s pipeline (`omnicli.evaluation.pipeline.Evaluator`,
its models loaded once for every pass) on one pass's `--audio-out` folder
over the manifest rows the prompts were made from, writes the same
eval_results / eval_summary files into `<folder>/eval` and returns the
figures that go into the pass's entry of the result file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omnicli.benchmark.result_models import EVAL_RESULT_KEYS
from omnicli.manifest import ManifestRow

if TYPE_CHECKING:
    from omnicli.driver.records import Prompt
    from omnicli.evaluation.pipeline import Evaluator
    from omnicli.profile.resolved import ResolvedProfile


@dataclass
class BenchEval:
    metrics: tuple[str, ...]
    asr: str | None = None  # ASR spec for WER (None: the language's default)
    sim: str = "dvector"
    mos: str = "dnsmos"
    lang: str = "en"
    device: str = "cpu"
    _evaluator: Evaluator | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, text: str, **kwargs: Any) -> BenchEval:
        """ValueError for an unknown metric."""
        from omnicli.evaluation.pipeline import parse_metrics

        return cls(parse_metrics(text), **kwargs)

    @property
    def evaluator(self) -> Evaluator:
        """One Evaluator for every pass: its models load on the first `score_pass`."""
        if self._evaluator is None:
            from omnicli.evaluation.pipeline import Evaluator

            self._evaluator = Evaluator(self.metrics, lang=self.lang, asr=self.asr, sim=self.sim, mos=self.mos,
                                        device=self.device)
        return self._evaluator

    def check(self) -> None:
        """Locates every model without loading it; AsrSetupError / ScorerSetupError when one is absent."""
        self.evaluator.check()

    def score_pass(
        self, audio_dir: Path, prompts: Sequence[Prompt], resolved_profile: ResolvedProfile | None = None,
        *, rows: Sequence[ManifestRow] | None = None,
    ) -> dict[str, Any]:
        """Scores one pass's audio folder over `rows` (default: the rows `prompts` were made from);
        returns the figures for its result entry."""
        from omnicli.evaluation.eval_report import RunContext
        from omnicli.evaluation.pipeline import Thresholds

        thresholds = Thresholds()
        context = RunContext()
        if resolved_profile is not None:
            thresholds = Thresholds.from_retention(resolved_profile.profile.retention)
            context = RunContext(profile_name=resolved_profile.name, profile_digest=resolved_profile.digest)
        chosen = list(rows) if rows is not None else prompt_rows(prompts)
        report = self.evaluator.score(chosen, audio_dir, thresholds=thresholds, context=context)
        paths = report.write(audio_dir / "eval")
        summary = report.summary
        figures = {"metrics": list(self.metrics), **{k: summary[k] for k in EVAL_RESULT_KEYS if k in summary}}
        figures["summary_file"] = str(paths["summary"])
        return figures


def prompt_rows(prompts: Sequence[Prompt]) -> list[ManifestRow]:
    """The manifest row of each distinct utterance (prompts cycle), in first-seen order."""
    from omnicli.benchmark.prompts import Cycled

    distinct: Iterable[Prompt] = prompts.distinct if isinstance(prompts, Cycled) else prompts
    rows: dict[str, ManifestRow] = {}
    for prompt in distinct:
        if prompt.utt in rows:
            continue
        if prompt.row is None:
            raise TypeError(f"prompt {prompt.utt!r} carries no manifest row to score against")
        rows[prompt.utt] = prompt.row
    return list(rows.values())
