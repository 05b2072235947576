"""Reading and closing recordings: bounded, never hanging, each refusal saying why (issue 31)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from gputop_train.record import reader
from gputop_train.record.files import describe_os_error
from gputop_train.record.reader import UnreadableRecording, read
from gputop_train.record.recorder import Recorder


def _recording(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


META = json.dumps({"kind": "meta", "t": 1_700_000_000.0, "format": 1, "command": ["x.py"]})


def test_a_fifo_is_refused_at_once_instead_of_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []
    thread = threading.Thread(target=lambda: outcome.append(_raised(read, fifo)), daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "read() blocked on a FIFO"
    assert isinstance(outcome[0], UnreadableRecording)
    assert "not a regular file" in str(outcome[0])


def test_a_device_and_a_directory_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UnreadableRecording, match="not a regular file"):
        read(Path("/dev/zero"))
    with pytest.raises(UnreadableRecording, match="a directory"):
        read(tmp_path)


def test_a_line_over_the_bound_is_skipped_without_holding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "MAX_LINE_BYTES", 1000)
    event = json.dumps({"kind": "notice", "t": 1_700_000_001.0, "text": "kept"})
    path = _recording(tmp_path / "r.jsonl", META, "x" * 5000, event)
    recording = read(path)
    assert recording.skipped_lines == [2]
    assert [e["kind"] for e in recording.events] == ["notice"]


def test_a_format_given_as_text_is_called_damaged_not_newer(tmp_path: Path) -> None:
    meta = json.dumps({"kind": "meta", "t": 1_700_000_000.0, "format": "1"})
    with pytest.raises(UnreadableRecording) as refused:
        read(_recording(tmp_path / "r.jsonl", meta))
    assert "not a version number" in str(refused.value) and "newer" not in str(refused.value)


def test_an_absurd_time_is_a_damaged_line_not_a_300_digit_duration(tmp_path: Path) -> None:
    late = json.dumps({"kind": "notice", "t": 1e308, "text": "from the far future"})
    recording = read(_recording(tmp_path / "r.jsonl", META, late))
    assert recording.skipped_lines == [2] and recording.ended_at == recording.started_at


def test_a_recording_moved_while_recording_is_named_by_its_new_path(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "old.jsonl", {"command": ["x.py"]})
    recorder.record("notice", {"text": "before the move"})
    (tmp_path / "old.jsonl").rename(tmp_path / "new.jsonl")
    recorder.close()
    assert recorder.path == tmp_path / "new.jsonl"
    assert recorder.renamed_from == tmp_path / "old.jsonl"
    assert len(read(recorder.path).events) == 1


def test_a_recording_deleted_while_recording_is_said_to_be(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "gone.jsonl", {"command": ["x.py"]})
    (tmp_path / "gone.jsonl").unlink()
    recorder.close()
    assert recorder.failed is not None and "deleted" in recorder.failed


def test_a_file_of_another_user_is_named_as_such(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to give a file to another user")
    path = tmp_path / "r.summary.md"
    path.write_text("")
    os.chown(path, 12345, 12345)
    text = describe_os_error(PermissionError(1, "Operation not permitted"), path)
    assert "another user (uid 12345)" in text


def _raised(function: object, *args: object) -> BaseException | None:
    try:
        function(*args)
    except BaseException as error:  # the test inspects it
        return error
    return None
