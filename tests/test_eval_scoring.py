"""Seed-TTS-eval normalisation, per-utterance scoring and aggregates, by hand-computed cases."""

from __future__ import annotations

import json

import pytest

from omnicli.evaluation.normalize import normalize_text
from omnicli.evaluation.transcripts import TranscriptsError, read_transcripts
from omnicli.evaluation.wer import EmptyReference, aggregate, mean_counting_failures, score_utterance


@pytest.mark.parametrize(
    "text, lang, expected",
    [
        ("Hello, World!  It's  me.", "en", "hello world it's me"),
        # one pass of replace("  ", " "): three spaces become two, four become two
        ("a   b", "en", "a  b"),
        ("a    b", "en", "a  b"),
        ("a - - b", "en", "a  b"),  # "-" removed leaves three spaces
        ("Don't", "en", "don't"),  # ASCII apostrophe kept
        ("Don’t", "en", "dont"),  # curly apostrophe is in zhon's punctuation: removed
        ("A \"quoted\" (word); x-ray", "en", "a quoted word xray"),
        ("你好，世界！", "zh", "你 好 世 界"),
        ("「书名」《标题》、。", "zh", "书 名 标 题"),
        ("你好 世界", "zh", "你 好   世 界"),  # the space is a character too
        ("AI很好", "zh", "A I 很 好"),  # no lowercasing for zh
        ("", "en", ""),
    ],
)
def test_normalize_text(text, lang, expected):
    assert normalize_text(text, lang) == expected


def test_normalize_rejects_unknown_language():
    with pytest.raises(ValueError, match="unsupported language"):
        normalize_text("x", "fr")


def test_score_counts_and_ratios():
    s = score_utterance("The cat sat on the mat.", "the cat sat on a mat mat", "en")
    assert (s.substitutions, s.deletions, s.insertions, s.hits) == (1, 0, 1, 5)
    assert s.ref_words == 6
    assert s.wer == pytest.approx(2 / 6)
    assert (s.sub, s.dele, s.ins) == (pytest.approx(1 / 6), 0.0, pytest.approx(1 / 6))


def test_score_curly_apostrophe_is_an_error():
    # ref "It’s fine" -> "its fine"; hyp "It's fine" -> "it's fine": one substitution of two words
    assert score_utterance("It’s fine", "It's fine", "en").wer == pytest.approx(0.5)


def test_score_zh_is_character_error_rate():
    s = score_utterance("今天天气很好。", "今天天汽很好", "zh")
    assert s.ref_words == 6 and s.substitutions == 1
    assert s.wer == pytest.approx(1 / 6)


def test_ratio_denominator_is_seed_split_on_single_space():
    # "a - - b" normalises to "a  b": jiwer sees 2 words, seed divides by len("a  b".split(" ")) == 3
    s = score_utterance("a - - b", "a c", "en")
    assert s.ref_words == 2 and s.wer == pytest.approx(0.5)
    assert s.sub == pytest.approx(1 / 3)


def test_empty_hypothesis_is_all_deletions():
    s = score_utterance("one two three", "", "en")
    assert s.wer == 1.0 and s.deletions == 3 and s.dele == 1.0


@pytest.mark.parametrize("ref", ["", "...!?", "，。"])
def test_empty_reference_raises(ref):
    with pytest.raises(EmptyReference):
        score_utterance(ref, "something", "en")


def test_aggregate_hand_computed():
    scores = [
        score_utterance("a b c d", "a b c d", "en"),  # wer 0
        score_utterance("a b", "x", "en"),  # 1 sub + 1 del: wer 1.0
        score_utterance("a b c d e f g h i j", "a b c d e f g h i x", "en"),  # wer 0.1
        score_utterance("a b", "a x", "en"),  # wer exactly 0.5: counts as "below 50"
    ]
    agg = aggregate(scores)
    assert agg["seed_wer_mean"] == round((0 + 1 + 0.1 + 0.5) / 4 * 100, 3) == 40.0
    assert agg["corpus_wer"] == round((0 + 2 + 1 + 1) / (4 + 2 + 10 + 2) * 100, 3) == 22.222
    assert agg["median_wer"] == 30.0
    assert agg["share_wer_above_50"] == 25.0
    assert agg["wer_mean_below_50"] == 20.0  # (0 + 0.1 + 0.5) / 3
    assert agg["sub"] == round((0 + 0.5 + 0.1 + 0.5) / 4 * 100, 3) == 27.5
    assert agg["del"] == 12.5
    assert agg["ins"] == 0.0


def test_corpus_differs_from_mean_of_ratios():
    # a short bad utterance weighs as much as a long good one in the mean, not in the corpus figure
    scores = [
        score_utterance("a", "b", "en"),
        score_utterance(" ".join(f"w{i}" for i in range(99)), " ".join(f"w{i}" for i in range(99)), "en"),
    ]
    agg = aggregate(scores)
    assert agg["seed_wer_mean"] == 50.0
    assert agg["corpus_wer"] == 1.0


def test_aggregate_empty_and_rounding():
    assert set(aggregate([]).values()) == {None}
    agg = aggregate([score_utterance("a b c", "a b x", "en")])
    assert agg["seed_wer_mean"] == 33.333
    assert agg["wer_mean_below_50"] == 33.333


def test_mean_counting_failures():
    assert mean_counting_failures([0.0, 0.5], 2) == 62.5
    assert mean_counting_failures([], 0) is None


def test_read_transcripts_jsonl_and_tsv(tmp_path):
    jl = tmp_path / "t.jsonl"
    jl.write_text(
        json.dumps({"utt": "a", "hyp": "hello"}) + "\n\n" + json.dumps({"utt": "b", "hyp": None}) + "\n"
        + json.dumps({"utt": "c", "hyp": "", "wer": 1}) + "\n",
        encoding="utf-8",
    )
    assert read_transcripts(jl) == {"a": "hello", "c": ""}
    tsv = tmp_path / "t.txt"
    tsv.write_text("a\thello world\nb\t\n", encoding="utf-8")
    assert read_transcripts(tsv) == {"a": "hello world", "b": ""}
    results_tsv = tmp_path / "wer_results.tsv"
    results_tsv.write_text("utt\twer\tref\thyp\tstatus\nx\t0.0\tr\tthe hyp\tok\ny\t\tr\t\tmissing\n", encoding="utf-8")
    assert read_transcripts(results_tsv) == {"x": "the hyp"}


def test_tsv_hypothesis_is_everything_after_the_first_tab(tmp_path):
    plain = tmp_path / "t.tsv"
    plain.write_text("a\tglue the sheet\tto the background\nb\t\tleading tab\n", encoding="utf-8")
    assert read_transcripts(plain) == {"a": "glue the sheet to the background", "b": " leading tab"}
    last = tmp_path / "last.tsv"  # with a header, a hyp in the last column takes the rest of the line
    last.write_text("utt\thyp\nx\tone\ttwo\n", encoding="utf-8")
    assert read_transcripts(last) == {"x": "one two"}
    middle = tmp_path / "wer_results.tsv"  # hyp not last: which cell holds the tab is unknown, so refuse
    middle.write_text("utt\twer\tref\thyp\tstatus\nx\t0.0\tr\tone\ttwo\tok\n", encoding="utf-8")
    with pytest.raises(TranscriptsError, match=r"wer_results.tsv:2: found 6 tab-separated fields, the header has 5"):
        read_transcripts(middle)


@pytest.mark.parametrize(
    "content, name, match",
    [
        (
            '{"utt": "a", "hyp": "x"}\n{"utt": "a", "hyp": "y"}\n',
            "d.jsonl",
            r"d.jsonl:2: duplicate utterance id 'a' \(first on line 1\)",
        ),
        ('{"utt": "a", "hyp": "x"}\nnot json\n', "j.jsonl", r"j.jsonl:2: invalid JSON"),
        ('{"utt": "a", "hyp": 3}\n', "h.jsonl", r"h.jsonl:1: key 'hyp' must be a string or null"),
        ("a\tb\nlonely\n", "t.tsv", r"t.tsv:2: expected utt<TAB>hyp"),
    ],
)
def test_read_transcripts_errors_name_file_and_line(tmp_path, content, name, match):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TranscriptsError, match=match):
        read_transcripts(path)


def test_read_transcripts_missing_file(tmp_path):
    with pytest.raises(TranscriptsError, match="not found"):
        read_transcripts(tmp_path / "nope.jsonl")
