"""tests/needs.py: a missing prerequisite skips locally and fails in CI."""

from __future__ import annotations

import pytest

from tests import needs


@pytest.mark.parametrize("value, expected", [("true", True), ("1", True), ("", False), ("false", False), ("0", False)])
def test_ci_is_read_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("CI", value)
    assert needs.in_ci() is expected


def test_missing_prerequisite_skips_outside_ci(monkeypatch, tmp_path):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no_such_module_xyz"):
        needs.module("no_such_module_xyz")
    with pytest.raises(pytest.skip.Exception, match="no-such-program-xyz"):
        needs.program("no-such-program-xyz")
    with pytest.raises(pytest.skip.Exception, match="gone"):
        needs.path(tmp_path / "gone")


def test_missing_prerequisite_fails_in_ci(monkeypatch, tmp_path):
    monkeypatch.setenv("CI", "true")
    for check in (lambda: needs.module("no_such_module_xyz"), lambda: needs.program("no-such-program-xyz"),
                  lambda: needs.path(tmp_path / "gone")):
        with pytest.raises(pytest.fail.Exception, match="CI: prerequisite missing"):
            check()


def test_present_prerequisites_are_returned(tmp_path):
    assert needs.module("json").dumps([]) == "[]"
    assert needs.program("sh").endswith("/sh")
    assert needs.path(tmp_path) == tmp_path


def test_a_flag_checked_elsewhere_skips_or_fails_the_same_way(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    needs.present(True, "never shown")
    with pytest.raises(pytest.skip.Exception, match="espeak-ng is gone"):
        needs.present(False, "espeak-ng is gone")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI: prerequisite missing: espeak-ng is gone"):
        needs.present(False, "espeak-ng is gone")
