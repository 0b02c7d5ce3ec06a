"""Issue 32 item 5: `omni bench --eval`'s SIM and MOS figures under vLLM-Omni's Seed-TTS quality keys in
the vLLM-shaped file (its plot_results.py reads seed_tts_sim_*, seed_tts_utmos_*), DNSMOS never under a
UTMOS key."""

from __future__ import annotations

import statistics

from omnicli.benchmark.result_models import BenchEvalFigures, VllmRunResult
from omnicli.benchmark.vllm_format import vllm_result
from omnicli.evaluation.results import EvalStatus
from omnicli.evaluation.scorers.score_folder import AudioResult, AudioRun, audio_summary

RUN = {"model": "m", "num_prompts": 2, "request_rate": "inf", "duration": 1.0, "completed": 2, "failed": 0}


def test_wer_sim_and_utmos_figures_take_vllm_omnis_names():
    figures = {"metrics": ["wer", "sim", "mos"], "seed_wer_mean": 12.5, "median_wer": 10.0, "num_scored": 2,
               "sim_mean": 0.61, "sim_median": 0.6, "num_sim_scored": 2, "utmos_mean": 3.9, "utmos_median": 3.8,
               "num_mos_scored": 2, "mos_backends": ["utmos"]}
    doc = vllm_result({**RUN, "eval": figures}, date="d")
    assert (doc["seed_tts_content_error_mean"], doc["seed_tts_content_error_median"]) == (0.125, 0.1)
    assert (doc["seed_tts_sim_mean"], doc["seed_tts_sim_median"], doc["seed_tts_sim_evaluated"]) == (0.61, 0.6, 2)
    assert (doc["seed_tts_utmos_mean"], doc["seed_tts_utmos_median"], doc["seed_tts_utmos_evaluated"]) == (3.9, 3.8, 2)
    assert not any(k.startswith("seed_tts_dnsmos") for k in doc)


def test_dnsmos_keeps_a_key_of_its_own():
    figures = {"metrics": ["mos"], "dnsmos_ovrl_mean": 3.2, "dnsmos_ovrl_median": 3.1, "num_mos_scored": 2,
               "mos_backends": ["dnsmos"]}
    doc = vllm_result({**RUN, "eval": figures}, date="d")
    assert (doc["seed_tts_dnsmos_ovrl_mean"], doc["seed_tts_dnsmos_ovrl_median"]) == (3.2, 3.1)
    assert not any(k.startswith("seed_tts_utmos") or k.startswith("seed_tts_content") for k in doc)


def test_omni_evals_utmos_mean_and_median_reach_the_vllm_file_as_vllm_omni_computes_them():
    """omni eval's MOS summary keeps UTMOS's median too (vLLM-Omni: statistics.fmean / statistics.median over
    the scored utterances); a failed utterance is in neither."""
    scores = [3.1, 4.4, 2.05, 3.9]
    results = [AudioResult(utt=f"u{i}", ref="", status=EvalStatus.OK, values={"utmos": v})
               for i, v in enumerate(scores)]
    results.append(AudioResult(utt="bad", ref="", status=EvalStatus.OK, errors={"mos": "utmos: boom"}))
    scorer = {"metric": "mos", "backend": "utmos", "model": "u.ts", "comparable_to": "-", "keys": ("utmos",)}
    run = AudioRun(results, [scorer], {"mos": 0.0}, {"mos": 0.0}, "t0", 0.0)
    summary = audio_summary(run, sim_threshold=0.5, mos_threshold=3.0)
    assert (summary["utmos_mean"], summary["utmos_median"]) == (round(statistics.fmean(scores), 4),
                                                                statistics.median(scores))
    assert summary["dnsmos_ovrl_median"] is None
    figures = BenchEvalFigures.model_validate({"metrics": ["mos"], **{k: summary[k] for k in summary
                                                                      if k in BenchEvalFigures.model_fields}})
    doc = vllm_result({**RUN, "eval": figures.model_dump(exclude_none=True)}, date="d")
    assert (doc["seed_tts_utmos_mean"], doc["seed_tts_utmos_median"], doc["seed_tts_utmos_evaluated"]) == (
        summary["utmos_mean"], summary["utmos_median"], 4)
    assert VllmRunResult.model_fields.keys() >= {"seed_tts_utmos_mean", "seed_tts_utmos_median"}
