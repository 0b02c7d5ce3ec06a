"""The family, engine and ASR registries: lookups, did-you-mean, lazy imports, missing installs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import types

import pytest
from typer.testing import CliRunner

from omnicli import families
from omnicli.cli import app
from omnicli.engine import backends
from omnicli.families import Family, FamilyUnavailable, UnknownFamily, get_family, register_family
from omnicli.profile import ProfileError, load_profile
from tests.conftest import DEMO_MANIFEST

runner = CliRunner()


@pytest.fixture
def registered():
    """Registers families for one test and removes them afterwards."""
    added: list[str] = []

    def add(family: Family) -> Family:
        families.family_names()  # the native ones first
        register_family(family)
        added.append(family.name)
        return family

    yield add
    for name in added:
        families._FAMILIES.pop(name, None)


def test_native_families_are_registered_with_their_engine_and_parts():
    assert families.family_names()[:3] == ["omni-tiny", "orpheus", "neutts-air"]
    assert {get_family(n).engine for n in ("omni-tiny", "orpheus", "neutts-air")} == {"native"}
    assert get_family("omni-tiny").checkpoint_specs() == []
    assert [s.profile_key for s in get_family("orpheus").checkpoint_specs()] == ["model_path", "codec_path"]
    assert families.tiny_families()[:2] == ["orpheus", "neutts-air"]  # then the optional backends' (qwen3-tts)
    assert get_family("neutts-air").parity_checks == "omnicli.parity.neutts:run"


def test_an_unknown_family_names_the_closest_one():
    with pytest.raises(
        UnknownFamily,
        match=r"unknown model family 'orpheu'; did you mean 'orpheus'\? \(known: omni-tiny, orpheus, neutts-air",
    ):
        get_family("orpheu")
    with pytest.raises(UnknownFamily) as info:
        get_family("zzz")
    assert "did you mean" not in str(info.value) and info.value.exit_code == 2


def test_a_profile_naming_an_unknown_family_is_a_profile_error_with_did_you_mean():
    with pytest.raises(ProfileError, match=r"--set model: unknown model family 'neutts'; did you mean 'neutts-air'\?"):
        load_profile(None, overrides=["model=neutts"], platform="cpu")


def test_a_family_is_registered_once(registered):
    registered(Family("test-once", "x", engine="native"))
    with pytest.raises(ValueError, match="registered twice"):
        register_family(Family("test-once", "y", engine="native"))


def test_registering_imports_neither_torch_nor_vllm():
    code = ("import sys; from omnicli.families import family_names, get_family; family_names(); get_family('orpheus');"
            "from omnicli.evaluation.asr import asr_backend_names; asr_backend_names();"
            "heavy = ('torch', 'vllm', 'vllm_omni', 'transformers', 'hibari', 'onnxruntime');"
            "print([m for m in heavy if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_module_exists_probes_parent_packages_without_raising():
    from omnicli.lazy import load_ref, module_exists

    assert module_exists("omnicli.engine.models.registrations")
    assert not module_exists("omnicli.no_such_package.families")  # find_spec alone would raise here
    assert not module_exists("no_such_top_level_module")
    assert load_ref("omnicli.engine.engine:Engine.start").__name__ == "start"
    with pytest.raises(ValueError, match="module:attribute"):
        load_ref("omnicli.engine.engine")


def test_an_optional_registration_module_is_imported_only_when_present(monkeypatch):
    imported = []
    monkeypatch.setattr(families, "REGISTRATIONS", ("omnicli.no_such_package.families", "json"))
    monkeypatch.setattr(families, "_loaded", False)
    real_import = __import__("importlib").import_module
    monkeypatch.setattr("importlib.import_module", lambda name, *a: imported.append(name) or real_import(name, *a))
    families.family_names()
    assert imported == ["json"]


def test_a_family_whose_packages_are_missing_is_a_usage_error_with_its_install_hint(registered, tmp_path):
    registered(Family("test-needs-pkg", "needs a package that is not installed", engine="native",
                      requires=("omnicli_no_such_backend",), install_hint="pip install 'omnicli[test-extra]'"))
    with pytest.raises(
        FamilyUnavailable,
        match=r"needs omnicli_no_such_backend, which is not installed: pip install 'omnicli\[test-extra\]'",
    ):
        families.check_available("test-needs-pkg")
    resolved = load_profile(None, overrides=["model=test-needs-pkg"], platform="cpu")  # the profile itself is valid
    with pytest.raises(FamilyUnavailable):
        asyncio.run(backends.start_engine(resolved))
    result = runner.invoke(
        app, ["synth", str(DEMO_MANIFEST), "--out", str(tmp_path / "out"), "--set", "model=test-needs-pkg"]
    )
    assert result.exit_code == 2, result.output
    assert "pip install 'omnicli[test-extra]'" in result.output
    assert not (tmp_path / "out" / "results.jsonl").exists()
    status = families.family_status("test-needs-pkg")
    assert status.parts == [("omnicli_no_such_backend", False, "not installed (pip install 'omnicli[test-extra]')")]
    assert not status.ready


def test_start_engine_starts_the_backend_the_family_names(registered, monkeypatch):
    started = []

    async def fake_start(resolved):
        started.append(resolved.profile.model)
        return "engine"

    fake = types.ModuleType("omnicli_test_fake_engine")
    fake.start = fake_start
    monkeypatch.setitem(sys.modules, "omnicli_test_fake_engine", fake)
    monkeypatch.setitem(backends.ENGINES, "test-backend", "omnicli_test_fake_engine:start")
    registered(Family("test-on-backend", "runs on a test backend", engine="test-backend"))
    resolved = load_profile(None, overrides=["model=test-on-backend"], platform="cpu")
    assert asyncio.run(backends.start_engine(resolved)) == "engine"
    assert started == ["test-on-backend"]


def test_asr_backends_come_from_one_registry(tmp_path, monkeypatch):
    from omnicli.evaluation.asr import AsrSetupError, AsrSpec, asr_backend_names, get_asr_backend

    assert asr_backend_names() == ["openai-whisper", "faster-whisper", "transformers", "funasr"]
    assert AsrSpec.parse("transformers") == AsrSpec("transformers", "openai/whisper-large-v3")
    assert get_asr_backend("funasr").default_model == "paraformer-zh"
    with pytest.raises(
        AsrSetupError, match=r"unknown ASR backend 'whisperx' in --asr 'whisperx' \(expected one of openai-whisper, "
    ):
        AsrSpec.parse("whisperx")
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"x")  # located, not loaded
    assert AsrSpec.parse(f"openai-whisper:{checkpoint}").locate() == checkpoint
    with pytest.raises(AsrSetupError, match="is a folder"):
        AsrSpec.parse(f"openai-whisper:{tmp_path}").locate()


def test_a_parity_report_exits_1_on_a_mismatch_and_0_when_checks_only_skipped():
    from omnicli.families import ParityReport
    from omnicli.parity.checks import Check

    ok, skipped = Check("a", "ok", "1/1"), Check("b", "skipped", "-")
    assert ParityReport([ok, skipped]).exit_code == 0
    mixed = ParityReport([ok, Check("c", "mismatch", "0/1"), skipped])
    assert mixed.exit_code == 1 and [c.name for c in mixed] == ["a", "c", "b"]  # iterated in the order run
    assert (mixed.count("ok"), mixed.count("mismatch"), mixed.count("skipped")) == (1, 1, 1)
