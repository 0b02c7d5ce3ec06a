"""`omni eval-wer`'s wav_res_ref_text.wer against what seed-tts-eval's own scripts do: get_wav_res_ref_text.py
builds the wav paths, run_wer.py writes one line per utterance, average_wer.py adds its header and `WER:` line
(each reproduced here from reading the scripts)."""

from __future__ import annotations

import os

import numpy as np

from omnicli.evaluation.results import EvalStatus, WerResult, seed_wer_lines
from omnicli.evaluation.wer import UttScore, aggregate

# 32 per-utterance WERs whose mean rounds differently with numpy's mean (average_wer.py: 28.438)
# than with sum()/len (28.437): the tie of finding 6.
TIE = [
    0.125,
    1 / 9,
    0.25,
    1 / 9,
    0.0,
    0.0,
    0.125,
    2 / 9,
    1 / 12,
    1 / 3,
    0.25,
    1.0,
    1 / 3,
    0.2,
    1.0,
    1 / 3,
    0.125,
    0.2,
    1.0,
    1 / 9,
    1 / 3,
    0.1,
    0.25,
    0.125,
    0.2,
    0.2,
    1.0,
    0.2,
    0.0,
    1 / 3,
    1 / 3,
    1 / 9,
]


def get_wav_res_ref_text(meta_lines: list[str], wav_dir: str) -> list[str]:
    """get_wav_res_ref_text.py: `wav_dir/utt.wav|prompt_wav|text` for each row whose wav exists
    (4- or 5-field rows; `utt|text` rows give `wav|text`)."""
    out = []
    for line in meta_lines:
        parts = line.strip().split("|")
        utt, text, prompt_wav = (parts[0], parts[3], parts[2]) if len(parts) in (4, 5) else (parts[0], parts[1], None)
        if not os.path.exists(os.path.join(wav_dir, utt + ".wav")):
            continue
        out.append("|".join([os.path.join(wav_dir, utt + ".wav"), prompt_wav, text] if prompt_wav is not None else
                            [os.path.join(wav_dir, utt + ".wav"), text]))
    return out


def average_wer(run_wer_lines: list[str]) -> str:
    """average_wer.py's output file for run_wer.py's lines: its header, each line unchanged, `WER: x%`."""
    out = (
        "utt"
        + "\t"
        + "wav_res"
        + "\t"
        + "res_wer"
        + "\t"
        + "text_ref"
        + "\t"
        + "text_res"
        + "\t"
        + "res_wer_ins"
        + "\t"
        + "res_wer_del"
        + "\t"
        + "res_wer_sub"
        + "\n"
    )
    wers = []
    for line in run_wer_lines:
        wav_path, wer, text_ref, text_res, inse, dele, subs = line.strip().split("\t")
        wers.append(float(wer))
        out += line
    return out + f"WER: {round(np.mean(wers) * 100, 3)}%\n"


def result(utt: str, wer: float, ref: str = "The text, as written.", hyp: str = " the text as written") -> WerResult:
    return WerResult(utt=utt, ref=ref, status=EvalStatus.OK, hyp=hyp, wer=wer, ins=0.0, dele=wer, sub=0.0)


def test_the_score_file_is_what_average_wer_writes_from_run_wers_lines_in_a_tie():
    results = [result(f"u{i}", w) for i, w in enumerate(TIE)]
    text = seed_wer_lines(results, "gen/")
    lines = text.splitlines(keepends=True)
    run_wer_lines = lines[1:-1]  # what run_wer.py wrote: average_wer.py's input
    assert text == average_wer(run_wer_lines)  # byte for byte
    assert lines[-1] == "WER: 28.438%\n" and round(sum(TIE) / len(TIE) * 100, 3) == 28.437
    scores = [UttScore(w, 0.0, w, 0.0, 0, 0, 0, 1, 1, "", "") for w in TIE]
    assert aggregate(scores)["seed_wer_mean"] == 28.438  # the summary agrees with the file


def test_wav_paths_and_texts_are_the_ones_seed_tts_evals_scripts_build(tmp_path):
    gen = tmp_path / "gen"
    gen.mkdir()
    for utt in ("a", "b"):
        (gen / f"{utt}.wav").write_bytes(b"")
    meta = [
        "a|prompt|p/a.wav|Hello, World.\n",
        "b|prompt|p/b.wav|It's  two  spaces.\n",
        "c|prompt|p/c.wav|never made\n",
    ]
    wav_dir = str(gen) + "/"  # as typed on cal_wer.sh's command line
    pairs = [line.split("|") for line in get_wav_res_ref_text(meta, wav_dir)]
    # run_wer.py: (wav, prompt, text) rows; the raw Whisper transcript keeps its leading space
    results = [
        result("a", 0.5, ref="Hello, World.", hyp=" Hello world."),
        result("b", 0.0, ref="It's  two  spaces.", hyp=" It's two spaces."),
    ]
    rows = [line.split("\t") for line in seed_wer_lines(results, wav_dir).splitlines()[1:-1]]
    assert (
        [(r[0], r[2]) for r in rows]
        == [(p[0], p[2]) for p in pairs]
        == [(wav_dir + "a.wav", "Hello, World."), (wav_dir + "b.wav", "It's  two  spaces.")]
    )
    assert [r[3] for r in rows] == [" Hello world.", " It's two spaces."]
    assert rows[0][1] == "0.5" and rows[0][4:] == ["0.0", "0.5", "0.0"]  # run_wer.py's f"{float}"
    tabbed = seed_wer_lines([result("t", 1.0, hyp="a\tb\nc")], wav_dir).splitlines()[1]
    assert tabbed.split("\t")[3] == "a b c"  # a tab or line break would break average_wer.py's 7 fields
