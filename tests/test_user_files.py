"""runtime/files.py: user-named files are read only when regular and within a bound."""

from __future__ import annotations

import os
import threading

import pytest

from omnicli.runtime.files import UserFileError, jsonl_lines, read_user_bytes, read_user_text


def test_a_regular_file_is_read_whole(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('{"a": 1}\n', encoding="utf-8")
    assert read_user_text(path) == '{"a": 1}\n'


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    result: list[BaseException] = []

    def read() -> None:
        try:
            read_user_bytes(fifo)
        except BaseException as exc:
            result.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert isinstance(result[0], UserFileError)
    assert "not a regular file" in str(result[0])


def test_a_link_to_a_device_is_refused(tmp_path):
    link = tmp_path / "x.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(UserFileError, match="not a regular file"):
        read_user_bytes(link)


def test_a_file_over_the_bound_is_refused(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b"x" * 101)
    with pytest.raises(UserFileError, match="100-byte limit"):
        read_user_bytes(path, max_bytes=100)
    assert read_user_bytes(path, max_bytes=101) == b"x" * 101


def test_missing_folder_and_bad_encoding_name_the_reason(tmp_path):
    with pytest.raises(UserFileError, match="no such file"):
        read_user_bytes(tmp_path / "missing.json")
    with pytest.raises(UserFileError, match="folder"):
        read_user_bytes(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"a": "\xff"}\n')
    with pytest.raises(UserFileError, match="not utf-8 text"):
        read_user_text(bad)


def test_jsonl_lines_split_on_newline_only():
    text = '{"t": "a\u2028b\u2029c\x85d"}\r\n{"t": 2}\n'
    assert jsonl_lines(text) == ['{"t": "a\u2028b\u2029c\x85d"}', '{"t": 2}', ""]
