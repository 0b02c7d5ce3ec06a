"""The exact messages `load_profile` gives for bad profiles and bad --set
values (file:line: dotted.key: reason), the did-you-mean rules, and the merge
rules at the edges. Written for the mutants that the broader tests in
test_profiles.py let survive (scripts/mutation.py profile_loader)."""

from __future__ import annotations

import locale
from pathlib import Path

import pytest

from omnicli.profile import Profile, ProfileError, load_profile

TOP = ", ".join(Profile.model_fields)  # the schema's top-level keys, in order


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    # Paths are shown relative to the cwd, so messages read `p.yaml:2: ...` whatever the temp dir.
    monkeypatch.chdir(tmp_path)


def problems_of(text: str | bytes, *, name: str = "p.yaml", **kwargs) -> list[str]:
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    kwargs.setdefault("platform", "cpu")
    with pytest.raises(ProfileError) as info:
        load_profile(name, **kwargs)
    return info.value.problems


def write(rel: str, text: str) -> Path:
    path = Path(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ reading


def test_unreadable_file_names_the_file():
    [problem] = problems_of(b"seed: \xff\xfe\n")
    assert problem.startswith("p.yaml: cannot read profile: ")
    assert "utf-8" in problem


def test_profiles_are_read_as_utf8_whatever_the_locale_says():
    write("p.yaml", 'model_options: {voice: "h\u00e9l\u00e8ne"}\n')
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # its encoding is ASCII
    try:
        resolved = load_profile("p.yaml", platform="cpu")
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
    assert resolved.profile.model_options == {"voice": "h\u00e9l\u00e8ne"}


def test_yaml_syntax_error_names_the_line_and_the_problem():
    assert problems_of("seed: 1\nmodel: x\ntalker: [1\n") == [
        "p.yaml:4: invalid YAML: expected ',' or ']', but got '<stream end>'"
    ]


def test_yaml_error_without_a_position_or_problem_still_names_the_file():
    # PyYAML's reader errors carry neither a problem_mark nor a problem: the whole text is the reason
    [problem] = problems_of(b"seed: 1\x01\n")
    assert problem.startswith("p.yaml: invalid YAML: unacceptable character #x0001")


def test_top_level_that_is_not_a_mapping_says_what_it_is():
    assert problems_of("- 1\n- 2\n") == ["p.yaml:1: the top level must be a mapping of settings (got list)"]


def test_duplicate_key_inside_a_section_is_reported_with_its_line():
    assert problems_of("seed: 1\ntalker:\n  threads: 1\n  threads: 2\n") == ["p.yaml:4: talker.threads: duplicate key"]


# -------------------------------------------------------- structural checks


def test_non_string_keys_are_refused_with_their_line_when_it_is_known():
    assert problems_of("seed: 1\n1: x\n") == ["p.yaml:2: 1: keys must be strings"]
    # YAML's `true` is read as True; the line index has it as 'true', so no line, but no crash either
    assert problems_of("true: 1\n") == ["p.yaml: True: keys must be strings"]


def test_meta_key_inside_a_platform_overlay():
    assert problems_of("seed: 1\nplatforms:\n  cpu:\n    base_config: x.yaml\n") == [
        "p.yaml:4: platforms.cpu.base_config: only allowed at the top level of a file"
    ]


def test_empty_base_config():
    assert problems_of("seed: 1\nbase_config: ''\n") == [
        "p.yaml:2: base_config: must be a path to a YAML file (got '')"
    ]


def test_platforms_that_is_not_a_mapping():
    assert problems_of("seed: 1\nplatforms: 3\n") == [
        "p.yaml:2: platforms: must be a mapping of platform overlays (cpu, cuda) (got int)"
    ]


def test_unknown_platform_suggests_the_closest_and_lists_them_all():
    assert problems_of("seed: 1\nplatforms:\n  cpux: {}\n") == [
        "p.yaml:3: platforms.cpux: unknown platform; did you mean 'cpu'? (platforms are cpu, cuda)"
    ]


def test_every_bad_overlay_is_reported_not_only_the_first():
    assert problems_of("platforms:\n  cpu: 5\n  cuda:\n    bogus: 1\n") == [
        "p.yaml:2: platforms.cpu: must be a mapping of settings (got int)",
        f"p.yaml:4: platforms.cuda.bogus: unknown key (known here: {TOP})",
    ]


def test_overlay_cannot_set_device():
    assert problems_of("seed: 1\nplatforms:\n  cpu:\n    device: cpu\n") == [
        "p.yaml:4: platforms.cpu.device: device selects the platform overlay, so an overlay cannot set it"
    ]


def test_section_and_model_options_that_are_not_mappings():
    assert problems_of("seed: 1\ntalker: 5\nmodel_options: [a]\n") == [
        "p.yaml:2: talker: must be a mapping of talker settings (got int)",
        "p.yaml:3: model_options: must be a mapping of options (got list)",
    ]


# ------------------------------------------------------------- unknown keys


def test_top_level_key_written_inside_a_section_is_sent_home():
    assert problems_of("talker:\n  seed: 1\n") == ["p.yaml:2: talker.seed: unknown key here; it belongs at seed"]


def test_section_key_at_the_top_level_names_every_section_that_has_it():
    assert problems_of("threads: 1\n") == [
        "p.yaml:1: threads: unknown key here; it belongs at talker.threads or codec.threads"
    ]


def test_key_of_another_section_names_only_that_section():
    assert problems_of("codec:\n  top_k: 1\n") == [
        "p.yaml:2: codec.top_k: unknown key here; it belongs at talker.top_k"
    ]


def test_misspelt_key_of_a_section_at_the_top_level_gets_its_full_name():
    assert problems_of("maxnumseqs: 1\n") == ["p.yaml:1: maxnumseqs: unknown key; did you mean 'codec.max_num_seqs'?"]


def test_a_loose_resemblance_to_a_section_key_is_not_suggested():
    # 'capture' is 0.7 alike to codec.capture_sizes: under the 0.75 needed for a key of another section
    assert problems_of("capture: 1\n") == [
        f"p.yaml:1: capture: unknown key (known here: {TOP}, base_config, platforms)"
    ]


def test_unlike_anything_lists_the_keys_known_there():
    assert problems_of("zzz: 1\n") == [f"p.yaml:1: zzz: unknown key (known here: {TOP}, base_config, platforms)"]


# ------------------------------------------------------------ schema errors


def test_value_error_message_is_shown_without_pydantics_prefix():
    assert problems_of("talker:\n  top_k: 0\n") == ["p.yaml:2: talker.top_k: top_k must be -1 (off) or >= 1 (got 0)"]


def test_value_json_cannot_show_is_shown_as_python_would():
    assert problems_of("seed: 2020-01-01\n") == [
        "p.yaml:1: seed: Input should be a valid integer (got datetime.date(2020, 1, 1))"
    ]


def test_a_mapping_where_a_number_belongs_names_the_file_and_not_the_mapping():
    # the only recorded locations are below talker.threads (talker.threads.a), so the file is named
    assert problems_of("talker:\n  threads: {a: 1}\n") == ["p.yaml: talker.threads: Input should be a valid integer"]


def test_a_bad_key_inside_model_options_is_located_at_model_options():
    assert problems_of("seed: 1\nmodel_options: {1: a}\n") == [
        "p.yaml:2: model_options.[key][1]: Input should be a valid string (got 1)"
    ]


def test_a_base_files_line_is_not_blamed_for_the_overlays_value():
    write("base.yaml", "seed: 1\ntalker:\n  threads: 2\n")
    write("p.yaml", "base_config: base.yaml\ntalker:\n  threads: {a: 1}\n")
    with pytest.raises(ProfileError) as info:
        load_profile("p.yaml", platform="cpu")
    assert info.value.problems == ["p.yaml: talker.threads: Input should be a valid integer"]


def test_platform_check_points_at_the_overlay_line():
    assert problems_of("seed: 1\nplatforms:\n  cpu:\n    talker:\n      model_runner: v2\n") == [
        (
            "p.yaml:5: talker.model_runner: model_runner v2 (vLLM Model Runner V2) needs CUDA; "
            "this machine's platform is cpu: use model_runner: v1"
        )
    ]


def test_unknown_platform_argument():
    write("p.yaml", "seed: 1\n")
    with pytest.raises(ProfileError) as info:
        load_profile("p.yaml", platform="gpu")
    assert info.value.problems == ["platform must be one of cpu, cuda (got 'gpu')"]


# ------------------------------------------------------------------ merging


def test_a_platform_overlays_model_options_replace_the_bases_whole():
    write("base.yaml", "platforms:\n  cpu:\n    model_options: {a: 1, b: 2}\n")
    write("p.yaml", "base_config: base.yaml\nplatforms:\n  cpu:\n    model_options: {c: 3}\n")
    resolved = load_profile("p.yaml", platform="cpu")
    assert resolved.profile.model_options == {"c": 3}
    assert resolved.origins["model_options"] == "platform:cpu"


def test_cycle_message_shows_the_chain_with_arrows():
    write("a.yaml", "base_config: b.yaml\n")
    write("b.yaml", "seed: 1\nbase_config: a.yaml\n")
    with pytest.raises(ProfileError) as info:
        load_profile("a.yaml", platform="cpu")
    assert info.value.problems == ["b.yaml:2: base_config: inheritance cycle: a.yaml -> b.yaml -> a.yaml"]


# ---------------------------------------------------------------- --set


def test_set_splits_at_the_first_equals_sign():
    write("p.yaml", "seed: 1\n")
    resolved = load_profile("p.yaml", overrides=["model_options={k: a=b}"], platform="cpu")
    assert resolved.profile.model_options == {"k": "a=b"}
    assert resolved.origins["model_options"] == "--set"


def test_every_bad_set_is_reported_in_order():
    assert problems_of(
        "seed: 1\n",
        overrides=["nokey", "base_config=x", "talker=1", "talkr.threads=1", "seed=[1", "=3", "seed=\x01", "seed=2"],
    ) == [
        "--set nokey: expected KEY=VALUE, e.g. --set codec.max_num_seqs=32",
        "--set base_config: base_config cannot be overridden; write it in a profile file",
        "--set talker: set one key at a time, e.g. --set talker.max_num_seqs=8",
        "--set talkr.threads: unknown key; did you mean 'talker.threads'?",
        "--set seed: value '[1' is not valid YAML (expected ',' or ']', but got '<stream end>')",
        "--set =3: expected KEY=VALUE, e.g. --set codec.max_num_seqs=32",
        # no `problem` on PyYAML's reader error: the error itself is shown
        (
            "--set seed: value '\\x01' is not valid YAML (unacceptable character #x0001: special characters are "
            'not allowed\n  in "<unicode string>", position 0)'
        ),
    ]


def test_set_model_options_empty_clears_it_and_a_mapping_replaces_it():
    write("p.yaml", "model_options: {a: 1}\n")
    assert load_profile("p.yaml", overrides=["model_options="], platform="cpu").profile.model_options == {}
    replaced = load_profile("p.yaml", overrides=["model_options={b: 2}"], platform="cpu")
    assert replaced.profile.model_options == {"b": 2}
    assert replaced.origins["model_options"] == "--set"
