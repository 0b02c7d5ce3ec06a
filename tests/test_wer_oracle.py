"""Our WER scorer against an independent oracle of seed-tts-eval's published procedure.

The oracle (tests/wer_oracle.py) is written from the procedure of seed-tts-eval's `run_wer.py`
and `average_wer.py`, not from omnicli's code. Thousands of generated en/zh pairs cover punctuation,
curly quotes, runs of spaces, tabs and references that normalise to nothing.
"""

from __future__ import annotations

import random
import string

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omnicli.evaluation.normalize import normalize_text
from omnicli.evaluation.wer import EmptyReference, aggregate, score_utterance
from tests.wer_oracle import oracle_normalize, oracle_score, oracle_words

# --------------------------------------------------------------- generators

EN_WORDS = [
    "the",
    "The",
    "CAT",
    "sat",
    "on",
    "a",
    "mat",
    "don't",
    "It's",
    "x-ray",
    "hello",
    "world",
    "42",
    "Dr.",
    "e.g.",
]
ZH_CHARS = list("今天天气很好你我他的是在有一个中国人说话书名标题")
PUNCT = list(string.punctuation) + list("，。！？、；：“”‘’「」『』《》（）…—·～　") + ["’", "‘", "“", "”"]
SPACES = [" ", "  ", "   ", "    ", "\t", " \t ", "\n", "\u3000"]


def random_text(rng: random.Random, lang: str) -> str:
    parts = []
    for _ in range(rng.randint(0, 12)):
        roll = rng.random()
        if roll < 0.5:
            parts.append(rng.choice(EN_WORDS) if lang == "en" else "".join(rng.choices(ZH_CHARS, k=rng.randint(1, 4))))
        elif roll < 0.75:
            parts.append(rng.choice(PUNCT))
        else:
            parts.append(rng.choice(SPACES))
        if rng.random() < 0.6:
            parts.append(" ")
    return "".join(parts)


def similar(rng: random.Random, text: str) -> str:
    """A hypothesis near the reference: a few characters dropped, doubled or replaced."""
    chars = list(text)
    for _ in range(rng.randint(0, 4)):
        if not chars:
            break
        k = rng.randrange(len(chars))
        op = rng.random()
        if op < 0.3:
            del chars[k]
        elif op < 0.6:
            chars.insert(k, chars[k])
        else:
            chars[k] = rng.choice(ZH_CHARS + EN_WORDS[:3] + [" ", "'", "’"])
    return "".join(chars)


def generated_pairs(lang: str, n: int, seed: int):
    rng = random.Random(seed)
    for _ in range(n):
        reference = random_text(rng, lang)
        hypothesis = similar(rng, reference) if rng.random() < 0.7 else random_text(rng, lang)
        yield reference, hypothesis


# -------------------------------------------------------------------- tests


def assert_matches_oracle(reference: str, hypothesis: str, lang: str) -> bool:
    """True when the pair was scored; False when both agree it cannot be."""
    assert normalize_text(reference, lang) == oracle_normalize(reference, lang)
    expected = oracle_score(reference, hypothesis, lang)
    if expected is None:
        with pytest.raises(EmptyReference, match="has no words after normalisation"):
            score_utterance(reference, hypothesis, lang)
        return False
    got = score_utterance(reference, hypothesis, lang)
    assert (got.ref_norm, got.hyp_norm) == (expected["truth"], expected["hypo"])
    assert got.wer == pytest.approx(expected["wer"], abs=1e-12)
    assert (got.substitutions, got.deletions, got.insertions) == expected["counts"]
    assert (got.sub, got.dele, got.ins) == pytest.approx(
        (expected["sub"], expected["dele"], expected["ins"]), abs=1e-12
    )
    assert got.ref_words == expected["ref_words"] == got.hits + got.substitutions + got.deletions
    return True


@pytest.mark.parametrize("lang, seed", [("en", 1), ("zh", 2)])
def test_scorer_matches_oracle_on_generated_pairs(lang, seed):
    scored = empty = 0
    for reference, hypothesis in generated_pairs(lang, 5000, seed):
        if assert_matches_oracle(reference, hypothesis, lang):
            scored += 1
        else:
            empty += 1
    # the generator reaches both branches, and the split(" ") denominator differs from the word count
    assert scored > 4000 and empty > 40


def test_generator_covers_the_cases_where_seed_and_jiwer_word_counts_differ():
    differ = sum(
        1 for reference, _ in generated_pairs("en", 3000, 1)
        if oracle_words(oracle_normalize(reference, "en"))
        and len(oracle_normalize(reference, "en").split(" ")) != len(oracle_words(oracle_normalize(reference, "en")))
    )
    assert differ > 200


TEXT = st.lists(st.sampled_from(list(string.ascii_letters + "'") + ZH_CHARS + PUNCT + SPACES), max_size=30).map("".join)


@settings(
    max_examples=600, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(reference=TEXT, hypothesis=TEXT, lang=st.sampled_from(["en", "zh"]))
def test_scorer_matches_oracle_property(reference, hypothesis, lang):
    assert_matches_oracle(reference, hypothesis, lang)


def oracle_aggregate(scores: list[dict]) -> dict:
    wers = [s["wer"] for s in scores]
    below = [w for w in wers if w <= 0.5]
    errors = sum(sum(s["counts"]) for s in scores)

    def pct(x):
        return round(x * 100, 3)

    return {
        "seed_wer_mean": pct(sum(wers) / len(wers)),
        "corpus_wer": pct(errors / sum(s["ref_words"] for s in scores)),
        "median_wer": pct(float(np.median(wers))),
        "share_wer_above_50": pct(sum(w > 0.5 for w in wers) / len(wers)),
        "wer_mean_below_50": pct(sum(below) / len(below)) if below else None,
        "sub": pct(sum(s["sub"] for s in scores) / len(scores)),
        "del": pct(sum(s["dele"] for s in scores) / len(scores)),
        "ins": pct(sum(s["ins"] for s in scores) / len(scores)),
    }


@pytest.mark.parametrize("lang, seed, size", [("en", 3, 1), ("en", 4, 7), ("zh", 5, 50), ("en", 6, 400)])
def test_aggregates_match_oracle(lang, seed, size):
    pairs = [(r, h) for r, h in generated_pairs(lang, size * 3, seed) if oracle_score(r, h, lang)][:size]
    ours = aggregate(score_utterance(r, h, lang) for r, h in pairs)
    expected = oracle_aggregate([oracle_score(r, h, lang) for r, h in pairs])
    assert ours.keys() == expected.keys()
    for key, value in expected.items():
        assert ours[key] == pytest.approx(value, abs=1.5e-3), key


def test_aggregate_of_nothing_has_the_same_keys_all_none():
    some = aggregate([score_utterance("a b", "a c", "en")])
    assert aggregate([]) == dict.fromkeys(some, None)
    assert list(some) == [
        "seed_wer_mean",
        "corpus_wer",
        "median_wer",
        "share_wer_above_50",
        "wer_mean_below_50",
        "sub",
        "del",
        "ins",
    ]


def test_utt_score_to_dict_has_every_field():
    score = score_utterance("The cat sat.", "the cat", "en")
    assert score.to_dict() == {
        "wer": pytest.approx(1 / 3), "sub": 0.0, "dele": pytest.approx(1 / 3), "ins": 0.0,
        "substitutions": 0, "deletions": 1, "insertions": 0, "hits": 2, "ref_words": 3,
        "ref_norm": "the cat sat", "hyp_norm": "the cat",
    }


def test_unknown_language_names_the_ones_supported():
    with pytest.raises(ValueError) as raised:
        normalize_text("x", "fr")
    assert str(raised.value) == "unsupported language 'fr' (expected one of en, zh)"
