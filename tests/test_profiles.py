"""Profiles: loading, inheritance, merge rules, platforms, --set, validation,
digest, the shipped presets and the `omni profiles` commands. No engine."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from omnicli.profile import (
    Profile,
    ProfileError,
    ResolvedProfile,
    diff_profiles,
    leaf_keys,
    list_presets,
    load_profile,
    presets_dir,
)

PRESETS = ["default", "cpu", "high_concurrency", "low_latency"]


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def error_of(*args, **kwargs) -> str:
    with pytest.raises(ProfileError) as info:
        load_profile(*args, **kwargs)
    return str(info.value)


# ------------------------------------------------------------- inheritance


def test_three_level_inheritance_with_relative_paths_in_different_folders(tmp_path):
    root = write(
        tmp_path, "base/root.yaml", "seed: 1\ntalker:\n  max_num_seqs: 8\n  threads: 2\ncodec:\n  threads: 3\n"
    )
    mid = write(
        tmp_path, "mid/deeper/mid.yaml", "base_config: ../../base/root.yaml\nseed: 2\ntalker:\n  max_num_seqs: 16\n"
    )
    leaf = write(tmp_path, "top/leaf.yaml", "base_config: ../mid/deeper/mid.yaml\ncodec:\n  threads: 4\n")

    resolved = load_profile(leaf, platform="cpu")
    p = resolved.profile
    assert (p.seed, p.talker.max_num_seqs, p.talker.threads, p.codec.threads) == (2, 16, 2, 4)
    assert resolved.name == "leaf" and resolved.source == leaf
    assert Path(resolved.origins["seed"]).resolve() == mid.resolve()
    assert Path(resolved.origins["talker.threads"]).resolve() == root.resolve()
    assert Path(resolved.origins["codec.threads"]).resolve() == leaf.resolve()
    assert resolved.origins["codec.max_num_seqs"] == "default"


def test_inheritance_cycle_is_rejected_with_the_chain(tmp_path):
    write(tmp_path, "a.yaml", "base_config: sub/b.yaml\n")
    write(tmp_path, "sub/b.yaml", "seed: 3\nbase_config: ../a.yaml\n")
    message = error_of(tmp_path / "a.yaml", platform="cpu")
    assert "inheritance cycle:" in message
    chain = message[message.index("inheritance cycle:"):]
    assert chain.index("a.yaml") < chain.index("b.yaml") < chain.rindex("a.yaml")
    assert "b.yaml:2: base_config" in message  # the file and line that closes the loop


def test_self_inheritance_is_a_cycle(tmp_path):
    write(tmp_path, "self.yaml", "base_config: self.yaml\n")
    assert "inheritance cycle:" in error_of(tmp_path / "self.yaml", platform="cpu")


def test_missing_base_shows_the_chain(tmp_path):
    write(tmp_path, "top.yaml", "base_config: mid.yaml\n")
    write(tmp_path, "mid.yaml", "seed: 1\nbase_config: gone/missing.yaml\n")
    message = error_of(tmp_path / "top.yaml", platform="cpu")
    assert "file not found" in message and "mid.yaml:2: base_config" in message
    chain = message[message.index("chain:"):]
    assert chain.index("top.yaml") < chain.index("mid.yaml") < chain.index("missing.yaml")


def test_missing_profile_file_and_unknown_preset_name(tmp_path):
    assert "not found" in error_of(tmp_path / "nope.yaml")
    message = error_of("hihg_concurrency", platform="cpu")
    assert "unknown profile 'hihg_concurrency'" in message and "did you mean 'high_concurrency'" in message


# ------------------------------------------------------------- merge rules


def test_merge_rules(tmp_path):
    write(tmp_path, "base.yaml", """
model: omni-tiny
talker: {max_num_seqs: 8, threads: 2}
codec: {capture_sizes: [1, 2, 4], codec_chunk_ramp: [2, 3]}
retention: {near_silent_dbfs: -50.0, clipped_share: 0.2}
model_options: {voice: alice, speed: 1.5}
""")
    write(tmp_path, "over.yaml", """
base_config: base.yaml
model: orpheus
talker: {threads: 3}
codec: {capture_sizes: [8]}
retention: {clipped_share: 0.3}
model_options: {speed: 2.0}
""")
    p = load_profile(tmp_path / "over.yaml", platform="cpu").profile
    assert p.model == "orpheus"  # scalar: overlay wins
    assert (p.talker.max_num_seqs, p.talker.threads) == (8, 3)  # stage merged key by key
    assert p.codec.capture_sizes == [8]  # list replaced whole, not appended
    assert p.codec.codec_chunk_ramp == [2, 3]  # untouched list inherited
    assert (p.retention.near_silent_dbfs, p.retention.clipped_share) == (-50.0, 0.3)  # mapping merged
    assert p.model_options == {"speed": 2.0}  # replaced whole: 'voice' is gone


def test_null_section_counts_as_empty(tmp_path):
    write(tmp_path, "base.yaml", "talker: {threads: 2}\n")
    write(tmp_path, "over.yaml", "base_config: base.yaml\ntalker:\n")
    assert load_profile(tmp_path / "over.yaml", platform="cpu").profile.talker.threads == 2


# --------------------------------------------------------------- platforms


PLATFORM_FILE = """
talker: {model_runner: v2, threads: 1}
platforms:
  cpu:
    talker: {model_runner: v1, threads: 2}
  cuda:
    codec: {codec_attention_backend: triton}
"""


def test_platform_overlay_follows_the_platform(tmp_path):
    path = write(tmp_path, "p.yaml", PLATFORM_FILE)
    cpu = load_profile(path, platform="cpu")
    cuda = load_profile(path, platform="cuda")
    assert (cpu.platform, cpu.profile.talker.model_runner, cpu.profile.talker.threads) == ("cpu", "v1", 2)
    assert cpu.profile.codec.codec_attention_backend == "sdpa"
    assert cpu.origins["talker.model_runner"] == "platform:cpu"
    assert (cuda.platform, cuda.profile.talker.model_runner, cuda.profile.talker.threads) == ("cuda", "v2", 1)
    assert cuda.profile.codec.codec_attention_backend == "triton"
    assert cuda.origins["codec.codec_attention_backend"] == "platform:cuda"
    assert "platforms" not in cpu.to_dict()


def test_device_forces_the_platform(tmp_path):
    path = write(tmp_path, "p.yaml", "device: cpu\n" + PLATFORM_FILE)
    assert load_profile(path, platform="cuda").platform == "cpu"
    forced = load_profile(tmp_path / "p.yaml", overrides=["device=cuda"], platform="cpu")
    assert forced.platform == "cuda" and forced.profile.codec.codec_attention_backend == "triton"


def test_platform_is_detected_when_not_given(tmp_path, monkeypatch):
    import omnicli.profile.loader as loader

    path = write(tmp_path, "p.yaml", PLATFORM_FILE)
    monkeypatch.setattr(loader, "detect_platform", lambda: "cuda")
    assert load_profile(path).platform == "cuda"
    monkeypatch.setattr(loader, "detect_platform", lambda: "cpu")
    assert load_profile(path).profile.talker.model_runner == "v1"


def test_platform_overlay_errors(tmp_path):
    write(tmp_path, "bad.yaml", "platforms:\n  cdua:\n    seed: 1\n  cpu:\n    device: cpu\n    base_config: x.yaml\n")
    message = error_of(tmp_path / "bad.yaml", platform="cpu")
    assert "platforms.cdua: unknown platform; did you mean 'cuda'" in message
    assert "bad.yaml:5: platforms.cpu.device" in message
    assert "platforms.cpu.base_config: only allowed at the top level" in message
    assert "platform must be one of" in error_of(tmp_path / "bad.yaml", platform="tpu")


# -------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (
            ["codec.generation_min_batch_size=0"],
            "codec.generation_min_batch_size: Input should be greater than or equal to 1",
        ),
        (
            ["codec.max_num_seqs=4", "codec.generation_min_batch_size=5"],
            "generation_min_batch_size (5) must be <= codec.max_num_seqs (4)",
        ),
        (
            ["codec.generation_max_wait_ms=-1"],
            "codec.generation_max_wait_ms: Input should be greater than or equal to 0",
        ),
        (["codec.generation_max_wait_ms=.nan"], "codec.generation_max_wait_ms: Input should be a finite number"),
        (["codec.generation_max_wait_ms=.inf"], "codec.generation_max_wait_ms: Input should be a finite number"),
        (
            ["codec.codec_attention_backend=flash"],
            "codec.codec_attention_backend: Input should be 'sdpa', 'slot', 'triton' or 'triton_slot'",
        ),
        (
            ["codec.codec_attention_backend=triton"],
            "codec_attention_backend triton needs CUDA; this machine's platform is cpu",
        ),
        (
            ["talker.model_runner=v2"],
            "model_runner v2 (vLLM Model Runner V2) needs CUDA; this machine's platform is cpu: use model_runner: v1",
        ),
        (["codec.capture_sizes=[4, 2]"], "capture_sizes must be sorted ascending without repeats"),
        (["codec.capture_sizes=[0, 2]"], "every entry of capture_sizes must be >= 1"),
        (["codec.codec_chunk_ramp=[]"], "codec_chunk_ramp must not be empty"),
        (["talker.top_k=0"], "top_k must be -1 (off) or >= 1"),
        (
            ["talker.gpu_memory_utilization=1.5"],
            "talker.gpu_memory_utilization: Input should be less than or equal to 1",
        ),
        (["talker.max_model_len=32"], "talker.max_model_len: Input should be greater than or equal to 64"),
        (["retention.clipped_share=2"], "retention.clipped_share"),
        (["codec.threads='2'"], 'codec.threads: Input should be a valid integer (got "2")'),
        (["talker.enforce_eager=1"], "talker.enforce_eager: Input should be a valid boolean"),
        (["device=gpu"], "device: Input should be 'auto', 'cpu' or 'cuda'"),
    ],
)
def test_invalid_values_are_rejected_naming_key_and_reason(sets, expected):
    message = error_of("default", overrides=sets, platform="cpu")
    assert expected in message
    assert message.startswith("--set ")  # the value came from --set, and the error says so


def test_cuda_only_features_pass_on_cuda():
    p = load_profile(
        "default", ["codec.codec_attention_backend=triton", "talker.model_runner=v2"], platform="cuda"
    ).profile
    assert (p.codec.codec_attention_backend, p.talker.model_runner) == ("triton", "v2")


def test_file_errors_name_file_line_key_and_reason(tmp_path):
    path = write(tmp_path, "bad.yaml", """
seed: 1
codec:
  generation_max_wait_ms: .nan
  max_num_seq: 3
talker:
  codec_chunk_frames: 4
  threads: many
""")
    message = error_of(path, platform="cpu")
    assert "bad.yaml:5: codec.max_num_seq: unknown key; did you mean 'codec.max_num_seqs'?" in message
    assert "bad.yaml:7: talker.codec_chunk_frames: unknown key here; it belongs at codec.codec_chunk_frames" in message
    path.write_text("seed: 1\ncodec:\n  generation_max_wait_ms: .nan\ntalker:\n  threads: many\n")
    message = error_of(path, platform="cpu")
    assert "bad.yaml:3: codec.generation_max_wait_ms: Input should be a finite number" in message
    assert 'bad.yaml:5: talker.threads: Input should be a valid integer (got "many")' in message
    assert len(message.splitlines()) == 2  # every problem reported at once
    path.write_text("talker:\n  threads: many\n  model_runner: v2\n")
    message = error_of(path, platform="cpu")  # platform rules alongside schema errors
    assert "bad.yaml:2: talker.threads" in message and "bad.yaml:3: talker.model_runner: model_runner v2" in message


def test_platform_rule_names_the_file_that_set_it(tmp_path):
    path = write(tmp_path, "v2.yaml", "seed: 1\ntalker:\n  model_runner: v2\n")
    assert "v2.yaml:3: talker.model_runner: model_runner v2" in error_of(path, platform="cpu")
    assert load_profile(path, platform="cuda").profile.talker.model_runner == "v2"


def test_min_batch_over_slots_in_file_points_at_the_key(tmp_path):
    path = write(tmp_path, "m.yaml", "codec:\n  max_num_seqs: 4\n  generation_min_batch_size: 8\n")
    assert "m.yaml:3: codec.generation_min_batch_size: generation_min_batch_size (8)" in error_of(path, platform="cpu")


def test_unknown_top_level_key_suggests(tmp_path):
    path = write(tmp_path, "u.yaml", "sede: 1\n")
    assert "u.yaml:1: sede: unknown key; did you mean 'seed'?" in error_of(path, platform="cpu")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- 1\n- 2\n", "the top level must be a mapping"),
        ("seed: [1\n", "invalid YAML"),
        ("seed: 1\nseed: 2\n", "y.yaml:2: seed: duplicate key"),
        ("talker: 3\n", "talker: must be a mapping"),
        ("base_config: 3\n", "base_config: must be a path"),
        ("model_options: [1]\n", "model_options: must be a mapping"),
        ("!!python/object:os.system {}\n", "invalid YAML"),  # safe_load only
    ],
)
def test_malformed_files(tmp_path, text, expected):
    path = write(tmp_path, "y.yaml", text)
    assert expected in error_of(path, platform="cpu")


def test_empty_file_is_all_defaults(tmp_path):
    resolved = load_profile(write(tmp_path, "empty.yaml", ""), platform="cpu")
    assert resolved.profile == Profile()
    assert set(resolved.origins.values()) == {"default"}
    assert resolved.origins.keys() == set(leaf_keys())


# ------------------------------------------------------------ hostile YAML


def _alias_bomb(kind: str, levels: int = 10, width: int = 10) -> str:
    """Under 1 KB; `levels` x `width` aliases describe width**levels values."""
    if kind == "mapping":
        lines = ["a0: &a0 {k: v}"]
        lines += [
            f"a{i}: &a{i} {{" + ", ".join(f"k{j}: *a{i - 1}" for j in range(width)) + "}" for i in range(1, levels + 1)
        ]
    else:
        lines = ["a0: &a0 [x]"]
        lines += [f"a{i}: &a{i} [" + ", ".join(f"*a{i - 1}" for _ in range(width)) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines + [f"model_options: {{bomb: *a{levels}}}"]) + "\n"


@pytest.mark.parametrize("kind", ["mapping", "list"])
def test_yaml_alias_bomb_is_rejected_before_it_expands(tmp_path, kind):
    # A real `omni profiles validate` under a 1 GiB address-space cap: before the
    # fix it grew past 6 GB (mapping aliases) or never finished (list aliases).
    import resource
    import subprocess
    import sys

    path = write(tmp_path, "bomb.yaml", _alias_bomb(kind))
    assert path.stat().st_size < 2048

    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    proc = subprocess.run(
        [sys.executable, "-m", "omnicli", "profiles", "validate", str(path), "--platform", "cpu"],
        capture_output=True, text=True, timeout=120, preexec_fn=cap_memory,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "bomb.yaml:" in proc.stdout and "more than 10000 values once aliases are expanded" in proc.stdout


def test_small_anchors_and_aliases_still_work(tmp_path):
    path = write(tmp_path, "a.yaml", "talker: &t {threads: 2}\nmodel_options: {a: &v [1, 2], b: *v}\n")
    assert load_profile(path, platform="cpu").profile.model_options == {"a": [1, 2], "b": [1, 2]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("model_options: " + "{a: " * 500 + "1" + "}" * 500 + "\n", "deep.yaml:1: nested more than 32 levels deep"),
        ("seed: 1\nmodel_options:\n" + "".join("  " * i + "a:\n" for i in range(1, 300)) + "  " * 300 + "b: 1\n",
         "deep.yaml:34: nested more than 32 levels deep"),
        ("model_options: &x {a: *x}\n", "deep.yaml:1: alias *x refers to a value that contains it"),
    ],
    ids=["flow", "block", "recursive"],
)
def test_deep_nesting_is_a_profile_error_naming_the_file(tmp_path, text, expected):
    # Was RecursionError (a 1,107-line traceback, exit 1).
    path = write(tmp_path, "deep.yaml", text)
    assert expected in error_of(path, platform="cpu")
    result = invoke("validate", str(path), "--platform", "cpu")
    assert result.exit_code == 2 and expected in result.output


def test_hostile_set_values_are_rejected():
    deep = "model_options=" + "{a: " * 500 + "1" + "}" * 500
    assert "--set model_options: nested more than 32 levels deep" in error_of("default", [deep], platform="cpu")
    bomb = "model_options=" + _alias_bomb("list").replace("\n", ", ").replace("model_options: ", "").join("{}")
    assert "--set model_options: more than 10000 values" in error_of("default", [bomb], platform="cpu")


# ------------------------------------------------------------------- --set


def test_set_values_are_parsed_as_yaml():
    resolved = load_profile(
        "default",
        [
            "codec.max_num_seqs=32",
            "codec.codec_ring_headroom=true",
            "codec.codec_chunk_ramp=[1,4,15]",
            "codec.capture_sizes=null",
            "codec.generation_max_wait_ms=2.5",
            "stage_timeout_s=30",
            "model_options.voice=alice",
            "model=orpheus", "model_path=ckpt/talker",
        ],
        platform="cpu",
    )
    c = resolved.profile.codec
    assert c.max_num_seqs == 32 and isinstance(c.max_num_seqs, int)
    assert c.codec_ring_headroom is True
    assert c.codec_chunk_ramp == [1, 4, 15]
    assert c.capture_sizes is None
    assert c.generation_max_wait_ms == 2.5
    assert resolved.profile.stage_timeout_s == 30.0
    assert resolved.profile.model_options == {"voice": "alice"}
    assert (resolved.profile.model, resolved.profile.model_path) == ("orpheus", "ckpt/talker")
    assert resolved.origins["codec.max_num_seqs"] == "--set"
    assert resolved.origins["model_options"] == "--set"


def test_set_applies_after_platform_overlay():
    # default.yaml's cpu overlay says model_runner v1; --set wins over it.
    message = error_of("default", ["talker.model_runner=v2"], platform="cpu")
    assert "model_runner v2" in message


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("codec.max_num_seq=3", "--set codec.max_num_seq: unknown key; did you mean 'codec.max_num_seqs'?"),
        ("max_num_seqs=3", "did you mean"),
        ("codec.threads", "expected KEY=VALUE"),
        ("=3", "expected KEY=VALUE"),
        ("talker=3", "set one key at a time"),
        ("base_config=x.yaml", "cannot be overridden"),
        ("codec.threads=[1", "not valid YAML"),
    ],
)
def test_bad_set_items(item, expected):
    assert expected in error_of("default", [item], platform="cpu")


# ------------------------------------------------------------------ digest


def test_digest_depends_on_content_only(tmp_path):
    a = write(tmp_path, "one/a.yaml", "seed: 5\ncodec:\n  threads: 2\n  max_num_seqs: 8\ntalker:\n  threads: 3\n")
    b = write(tmp_path, "two/b.yaml", "talker:\n  threads: 3\ncodec:\n  max_num_seqs: 8\n  threads: 2\nseed: 5\n")
    ra, rb = load_profile(a, platform="cpu"), load_profile(b, platform="cpu")
    assert ra.digest == rb.digest and len(ra.digest) == 16
    int(ra.digest, 16)
    # Same content reached through inheritance and --set: same digest.
    c = write(tmp_path, "three/c.yaml", "base_config: ../one/a.yaml\nseed: 6\n")
    assert load_profile(c, ["seed=5"], platform="cpu").digest == ra.digest
    # Any change changes it.
    assert load_profile(a, ["codec.threads=1"], platform="cpu").digest != ra.digest
    assert load_profile(a, ["model_options.x=1"], platform="cpu").digest != ra.digest


def test_to_dict_round_trips_through_the_schema():
    resolved = load_profile("low_latency", platform="cpu")
    data = resolved.to_dict()
    json.dumps(data)
    assert Profile.model_validate(data) == resolved.profile


def test_diff_profiles_lists_only_differing_keys():
    a = load_profile("default", platform="cpu")
    b = load_profile("default", ["codec.threads=2", "model_options.x=1"], platform="cpu")
    assert diff_profiles(a, b) == [("codec.threads", 1, 2), ("model_options", {}, {"x": 1})]
    assert diff_profiles(a, a) == []


# ----------------------------------------------------------------- presets


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("platform", ["cpu", "cuda"])
def test_presets_are_valid(name, platform):
    resolved = load_profile(name, platform=platform)
    assert isinstance(resolved, ResolvedProfile) and resolved.name == name
    assert resolved.profile.talker.kv_cache_space_gb <= 2.0  # the machine has 24 GiB


def test_preset_intent():
    default_cpu, default_cuda = load_profile("default", platform="cpu"), load_profile("default", platform="cuda")
    assert (default_cpu.profile.talker.model_runner, default_cuda.profile.talker.model_runner) == ("v1", "v2")
    cpu = load_profile("cpu", platform="cuda")
    assert cpu.platform == "cpu" and cpu.profile.talker.max_num_seqs < default_cpu.profile.talker.max_num_seqs
    hc = load_profile("high_concurrency", platform="cpu").profile.codec
    assert (hc.generation_min_batch_size, hc.generation_max_wait_ms) == (16, 12.0)
    ll = load_profile("low_latency", platform="cpu").profile.codec
    assert ll.codec_chunk_ramp == [1, 4, 15] and ll.generation_max_wait_ms == 0
    assert ll.generation_min_batch_size == 1


def test_presets_have_descriptions_and_default_is_the_default():
    infos = {p.name: p for p in list_presets()}
    assert set(PRESETS) <= set(infos)
    assert all(infos[n].description for n in PRESETS)
    assert load_profile(None, platform="cpu").digest == load_profile("default", platform="cpu").digest
    assert load_profile(None, platform="cpu").name == "default"


def test_presets_dir_env_override(tmp_path, monkeypatch):
    write(tmp_path, "mine.yaml", "# Mine.\nseed: 9\n")
    monkeypatch.setenv("OMNI_PROFILES_DIR", str(tmp_path))
    assert presets_dir() == tmp_path
    assert load_profile("mine", platform="cpu").profile.seed == 9
    assert [(p.name, p.description) for p in list_presets()] == [("mine", "Mine.")]


# --------------------------------------------------------------------- CLI


def invoke(*args: str):
    from omnicli.cli import app  # the whole `omni` app: an import failure of it fails these tests

    return CliRunner().invoke(app, ["profiles", *args])


def test_cli_list():
    result = invoke("list")
    assert result.exit_code == 0, result.output
    for name in PRESETS:
        assert name in result.output
    assert "Lowest time to first audio" in result.output


def test_cli_show_table_and_json():
    result = invoke("show", "low_latency", "--platform", "cpu", "--set", "codec.threads=2")
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "codec.threads" in line)
    assert "2" in row and "--set" in row
    assert "platform:cpu" in next(line for line in result.output.splitlines() if "talker.model_runner" in line)

    result = invoke("show", "high_concurrency", "--platform", "cuda", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["platform"] == "cuda" and doc["profile"]["talker"]["model_runner"] == "v2"
    assert doc["digest"] == load_profile("high_concurrency", platform="cuda").digest
    assert doc["origins"]["codec.generation_min_batch_size"].endswith("high_concurrency.yaml")


def test_cli_show_bad_set_exits_2():
    result = invoke("show", "--platform", "cpu", "--set", "codec.max_num_seq=3")
    assert result.exit_code == 2
    assert "did you mean 'codec.max_num_seqs'" in result.output


def test_cli_validate(tmp_path):
    good = write(tmp_path, "good.yaml", "seed: 3\n")
    bad = write(tmp_path, "bad.yaml", "codec:\n  generation_min_batch_size: 0\n")
    result = invoke("validate", str(good), "--platform", "cpu")
    assert result.exit_code == 0, result.output
    result = invoke("validate", str(good), str(bad), "--platform", "cpu")
    assert result.exit_code == 2
    assert "bad.yaml:2: codec.generation_min_batch_size" in result.output
    assert "1 of 2 profile(s) invalid" in result.output


def test_cli_validate_follows_the_platform(tmp_path):
    triton = write(tmp_path, "t.yaml", "codec:\n  codec_attention_backend: triton\n")
    on_cuda = invoke("validate", str(triton), "--platform", "cuda")
    assert on_cuda.exit_code == 0, on_cuda.output
    on_cpu = invoke("validate", str(triton), "--platform", "cpu")
    assert on_cpu.exit_code == 2 and "t.yaml:2: codec.codec_attention_backend" in on_cpu.output


def test_cli_diff():
    result = invoke("diff", "default", "high_concurrency", "--platform", "cpu")
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "codec.generation_max_wait_ms" in line)
    assert "0.0" in row and "12.0" in row
    assert "codec.dtype" not in result.output  # equal keys are not listed
    same = invoke("diff", "default", "default", "--platform", "cpu")
    assert same.exit_code == 0 and "no differences" in same.output


def test_shipped_presets_parse_as_plain_yaml():
    for name in PRESETS:
        data = yaml.safe_load((presets_dir() / f"{name}.yaml").read_text())
        assert isinstance(data, dict)
        if name != "default":
            assert data["base_config"] == "default.yaml"
    assert not math.isnan(load_profile("default", platform="cpu").profile.codec.generation_max_wait_ms)


def _doc_default(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def test_docs_reference_lists_every_key_with_its_default():
    docs = (Path(__file__).resolve().parent.parent / "docs" / "profiles.md").read_text(encoding="utf-8")
    defaults = load_profile(None, platform="cpu").flat()  # just for the key list
    schema_defaults = Profile().model_dump(mode="json")
    for key in defaults:
        section, _, name = key.rpartition(".")
        row_start = f"| {section or '(top)'} | `{name}` |"
        row = next((line for line in docs.splitlines() if line.startswith(row_start)), None)
        assert row is not None, f"docs/profiles.md has no row for {key}"
        value = schema_defaults[section][name] if section else schema_defaults[name]
        assert f"| `{_doc_default(value)}` |" in row, f"default of {key} in docs differs from the schema"
