"""The job's log never costs the monitor memory in proportion to its size (issue 31)."""

from __future__ import annotations

from pathlib import Path

from gputop_train.job.log import MAX_LINE_CHARS, READ_BYTES, LogTail


def test_a_log_far_larger_than_a_read_is_skipped_to_its_tail_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    line = "x" * 99 + "\n"
    with path.open("w") as handle:
        for number in range(10 * READ_BYTES // len(line)):
            handle.write(f"{number:08d} {line}")
    tail = LogTail(path)
    lines = tail.read_new()
    assert lines[0].startswith("[gputop-train:") and "skipped" in lines[0]
    assert tail.skipped_bytes >= 8 * READ_BYTES
    read = sum(len(text) + 1 for text in lines[1:])
    assert read <= READ_BYTES
    assert lines[-1] == f"{10 * READ_BYTES // len(line) - 1:08d} {line.strip()}"
    assert all(len(text) == len(lines[-1]) for text in lines[1:])  # no torn first line


def test_output_without_newlines_is_cut_to_one_bounded_line(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    tail = LogTail(path)
    with path.open("w") as handle:
        for _ in range(40):
            handle.write("y" * 100_000)
            handle.flush()
            tail.read_new()
        handle.write("\nnext line\n")
    tail.read_new()
    assert len(tail._partial) == 0  # nothing of the endless line is held
    kept = list(tail.lines)
    assert len(kept) == 2 and kept[1] == "next line"
    assert kept[0].startswith("y" * MAX_LINE_CHARS) and "cut" in kept[0]
    assert len(kept[0]) < MAX_LINE_CHARS + 100


def test_a_carriage_return_redraws_the_line_as_a_terminal_would(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    tail = LogTail(path)
    with path.open("w") as handle:
        for percent in range(0, 101, 10):
            handle.write(f"\repoch 1: {percent:3d}%|" + "#" * percent)
            handle.flush()
            assert tail.read_new() == []
            assert len(tail._partial) <= 200  # the bar's latest draw only
        handle.write("\nwindows line\r\n")
    assert tail.read_new() == ["epoch 1: 100%|" + "#" * 100, "windows line"]
