"""A family's own chunk geometry applies only where the profile chose none (omnicli.engine.chunker.stream_geometry)."""

import pytest

from omnicli.engine.chunker import describe_geometry, stream_geometry
from omnicli.engine.models import neutts
from omnicli.profile import load_profile

FAMILY = ((5, 20, 75), 100)


@pytest.mark.parametrize("preset", ["default", "cpu", "high_concurrency"])
def test_the_family_geometry_applies_under_presets_that_set_no_chunk_size(preset):
    cfg = stream_geometry(load_profile(preset), FAMILY)
    assert describe_geometry(cfg) == "5/20/75+100"
    assert (cfg.initial_codec_chunk_frames, cfg.codec_chunk_frames, cfg.codec_chunk_ramp) == (5, 100, [5, 20, 75])


@pytest.mark.parametrize("key,value", [("codec.codec_chunk_frames", "25"), ("codec.initial_codec_chunk_frames", "3"),
                                       ("codec.codec_chunk_ramp", "[1,4]")])
def test_any_chunk_size_the_profile_sets_takes_over(key, value):
    resolved = load_profile("cpu", overrides=[f"{key}={value}"])
    assert stream_geometry(resolved, FAMILY) == resolved.profile.codec


def test_a_preset_that_sets_its_ramp_keeps_it():
    resolved = load_profile("low_latency")
    assert describe_geometry(stream_geometry(resolved, FAMILY)) == "1/4/15+25"


def test_a_family_without_its_own_geometry_gets_the_schema_defaults():
    assert describe_geometry(stream_geometry(load_profile("cpu"), None)) == "5+25"


def test_neutts_geometry_is_valid_for_the_profile_budget():
    (first, *_), steady = neutts.STREAM_GEOMETRY
    cfg = stream_geometry(load_profile("cpu"), neutts.STREAM_GEOMETRY)
    biggest = max(*cfg.codec_chunk_ramp, cfg.codec_chunk_frames) + neutts.LOOKAHEAD_FRAMES
    assert first <= 10 and biggest <= cfg.max_num_batched_tokens  # a short first chunk; every chunk fits a step
