"""Issue 32 item 5: `omni bench --eval`'s SIM and MOS figures under vLLM-Omni's Seed-TTS quality keys in
the vLLM-shaped file (its plot_results.py reads seed_tts_sim_*, seed_tts_utmos_*), DNSMOS never under a
UTMOS key."""

from __future__ import annotations

from omnicli.benchmark.vllm_format import vllm_result

RUN = {"model": "m", "num_prompts": 2, "request_rate": "inf", "duration": 1.0, "completed": 2, "failed": 0}


def test_wer_sim_and_utmos_figures_take_vllm_omnis_names():
    figures = {"metrics": ["wer", "sim", "mos"], "seed_wer_mean": 12.5, "median_wer": 10.0, "num_scored": 2,
               "sim_mean": 0.61, "sim_median": 0.6, "num_sim_scored": 2, "utmos_mean": 3.9, "num_mos_scored": 2,
               "mos_backends": ["utmos"]}
    doc = vllm_result({**RUN, "eval": figures}, date="d")
    assert (doc["seed_tts_content_error_mean"], doc["seed_tts_content_error_median"]) == (0.125, 0.1)
    assert (doc["seed_tts_sim_mean"], doc["seed_tts_sim_median"], doc["seed_tts_sim_evaluated"]) == (0.61, 0.6, 2)
    assert (doc["seed_tts_utmos_mean"], doc["seed_tts_utmos_evaluated"]) == (3.9, 2)
    assert not any(k.startswith("seed_tts_dnsmos") for k in doc)


def test_dnsmos_keeps_a_key_of_its_own():
    figures = {"metrics": ["mos"], "dnsmos_ovrl_mean": 3.2, "dnsmos_ovrl_median": 3.1, "num_mos_scored": 2,
               "mos_backends": ["dnsmos"]}
    doc = vllm_result({**RUN, "eval": figures}, date="d")
    assert (doc["seed_tts_dnsmos_ovrl_mean"], doc["seed_tts_dnsmos_ovrl_median"]) == (3.2, 3.1)
    assert not any(k.startswith("seed_tts_utmos") or k.startswith("seed_tts_content") for k in doc)
