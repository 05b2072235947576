"""``summary``, ``report``, ``compare``, ``check`` and ``sessions`` on odd input and on a busy
box (issue 46): absurd figures read as N/A with a count, arguments range-checked, places named
by their own path, and the machine's load shown beside a verdict it may explain."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gputop_train.cli import reports as report_cli
from gputop_train.cli.sessions import list_sessions
from gputop_train.record.reader import read, replay_all
from gputop_train.record.replay import ReplayController
from gputop_train.record.summary import summarize
from gputop_train.reports import check
from gputop_train.reports.box import box_load
from gputop_train.reports.compare import compare
from gputop_train.reports.compare_format import text
from gputop_train.reports.load import load
from tests.support.cli import gputop
from tests.support.synthetic_recording import write_synthetic


def _with_absurd_gpu_sample(path: Path) -> Path:
    """A two-rank recording whose last GPU sample says 1e308% (valid JSON) and NaN W."""
    write_synthetic(path, ranks=2, seconds=20.0)
    lines = path.read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if '"kind": "gpu"' in line)
    event = json.loads(lines[last])
    event["samples"][0]["util_pct"] = 1e308
    lines[last] = json.dumps(event).replace('"power_w": 500.0', '"power_w": NaN', 1)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_absurd_figures_are_read_as_na_and_counted(tmp_path: Path) -> None:
    recording = read(_with_absurd_gpu_sample(tmp_path / "odd.jsonl"))
    assert recording.skipped_figures == 2
    summary = summarize(replay_all(recording), recording.meta)
    assert 0 <= summary["figures"]["gpu_util_pct"] <= 100
    controller = ReplayController(recording)  # replay's cursor: seeks over the same events
    controller.seek(recording.ended_at)
    assert controller.snapshot(10.0, 60.0, 100).gpus  # the 1e308 sample drawn as N/A


def test_a_gpu_share_outside_0_to_100_is_read_as_na() -> None:
    from gputop_train.record.reader import SaneDecoder

    line = '{"kind": "gpu", "t": 1.0, "samples": [{"index": 0, "t": 1.0, "util_pct": 150,'
    line += ' "sm_active_pct": 50, "processes": [{"pid": 1, "mem_bytes": 1, "sm_pct": -3}]}]}'
    event, dropped = SaneDecoder().event(line)
    sample = event["samples"][0]
    assert dropped == 2 and sample["util_pct"] is None and sample["sm_active_pct"] == 50
    assert sample["processes"][0]["sm_pct"] is None


def test_summary_report_and_compare_take_an_absurd_figure_with_a_warning(tmp_path: Path) -> None:
    odd = _with_absurd_gpu_sample(tmp_path / "odd.jsonl")
    for args in (("summary", str(odd)), ("report", str(odd)), ("compare", str(odd), str(odd))):
        result = gputop(*args)
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        assert "non-finite or absurd figure(s)" in result.stderr


@pytest.mark.parametrize(
    ("argument", "said"),
    [
        (("--max-memory", "1e999GiB"), "expected a finite size"),
        (("--max-step-ms", "nan"), "expected a finite number above 0"),
        (("--min-samples-per-s", "-1"), "expected a finite number above 0"),
        (("--max-regression", "nan"), "expected a percentage"),
        (("--max-load-change", "inf"), "expected a percentage"),
    ],
)
def test_check_bounds_are_range_checked(
    argument: tuple[str, str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        report_cli.run_subcommand(["check", "--steps", "5", *argument, "x.py"])
    assert ended.value.code == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("budget", [("--steps", "-5"), ("--steps", "0"), ("--seconds", "nan")])
def test_a_check_budget_must_be_above_zero(
    budget: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        report_cli.run_subcommand(["check", *budget, "x.py"])
    assert ended.value.code == 2
    assert "above 0" in capsys.readouterr().err


def test_a_check_of_a_missing_script_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = report_cli.run_subcommand(
        ["check", "--steps", "5", "--record", str(tmp_path / "r.jsonl"), "no_such_script.py"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "no such script: no_such_script.py" in err and "no recording" not in err
    assert not (tmp_path / "r.jsonl").exists()


def test_a_report_where_no_file_can_go_names_that_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = tmp_path / "run.jsonl"
    write_synthetic(recording, ranks=2, seconds=20.0)
    assert report_cli.run_subcommand(["report", str(recording), "-o", "/proc/x.html"]) == 2
    err = capsys.readouterr().err
    assert "/proc/x.html" in err and ".x.html." not in err  # never the temporary file's name
    missing = tmp_path / "nowhere" / "x.html"
    assert report_cli.run_subcommand(["report", str(recording), "-o", str(missing)]) == 2
    assert f"no directory {missing.parent}" in capsys.readouterr().err


def test_a_report_into_a_directory_goes_inside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = tmp_path / "run.jsonl"
    write_synthetic(recording, ranks=2, seconds=20.0)
    folder = tmp_path / "pages"
    folder.mkdir()
    assert report_cli.run_subcommand(["report", str(recording), "-o", str(folder)]) == 0
    assert capsys.readouterr().out.strip() == str(folder / "run.report.html")
    assert (folder / "run.report.html").stat().st_size > 0


def test_sessions_counts_an_attached_recordings_steps_as_its_summary_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "attached.jsonl").write_text("")
    summary = {"figures": {"total_steps": 5000, "samples_per_s": 100.0}, "exit_code": 0,
               "duration_s": 60.0, "command": ["python", "train.py"],
               "steps_before_start": 4200}  # fmt: skip
    (tmp_path / "attached.summary.json").write_text(json.dumps(summary))
    list_sessions(tmp_path)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("attached"))
    assert " 800 " in line and "(attached at the job's step 4200)" in line
    assert " 5000 " not in line


# Two 2-rank runs of 64 cores, each rank with one worker: the job takes 3.1 cores in A; in B
# on the busier box its workers get 60% of a core (2.4 cores in all) and its steps are slower.
QUIET, BUSY = 92.0, 100.0  # the machine's busy share: 8.2 cores left free, then 2.4


def _runs(folder: Path, busy_b: float) -> tuple[Path, Path]:
    a, b = folder / "a.jsonl", folder / "b.jsonl"
    write_synthetic(a, ranks=2, seconds=60.0, knob_at_s=1000.0, workers=1, busy_pct=QUIET)
    starved = 60.0 if busy_b == BUSY else 95.0
    write_synthetic(b, ranks=2, seconds=60.0, knob_at_s=1000.0, workers=1, busy_pct=busy_b,
                    step_ms=300.0, worker_cpu_pct=starved)  # fmt: skip
    return a, b


def test_the_box_of_each_run_is_read_from_its_process_samples(tmp_path: Path) -> None:
    a, _ = _runs(tmp_path, BUSY)
    box = box_load(read(a))
    assert box.cores == 64 and box.busy_pct == QUIET and box.saturated
    assert box.job_cores == pytest.approx(2 * (0.60 + 0.95))
    assert box.others_cores == pytest.approx(64 * QUIET / 100 - 3.1)


def test_a_worse_run_on_a_busier_box_is_marked_as_the_load_may_explain(tmp_path: Path) -> None:
    a, b = _runs(tmp_path, BUSY)
    comparison = compare(load(a), load(b))
    assert comparison.box_change is not None and comparison.box_change.tighter == "B"
    assert comparison.headline.startswith("B is worse beyond noise")
    assert "the box's load may explain it: B had fewer free cores" in comparison.headline
    shown = text(comparison)
    assert "box A: 64 cores 92% busy" in shown and "box B: 64 cores 100% busy" in shown
    assert "warning: the box differed: other processes left 8.2 cores free in A and 2.4" in shown


def test_the_same_box_marks_nothing(tmp_path: Path) -> None:
    a, b = _runs(tmp_path, QUIET)
    comparison = compare(load(a), load(b))
    assert comparison.box_note == "" and "load" not in comparison.headline


def test_check_refuses_to_judge_when_the_box_differed_beyond_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole ``check`` after the run: the run is the busier box's recording, copied where
    the job would have recorded."""
    baseline, busier = _runs(tmp_path, BUSY)

    def ran(_target: list[str], recording: Path, *_budget: object) -> tuple[int, bool]:
        shutil.copy(busier, recording)
        return 0, True

    monkeypatch.setattr(check, "run_job", ran)
    monkeypatch.setattr(report_cli, "_cannot_launch", lambda _target: "")
    outputs = ["--record", str(tmp_path / "run.jsonl"), "--junit", str(tmp_path / "run.xml"),
               "--markdown", str(tmp_path / "run.md"), "--no-report"]  # fmt: skip
    argv = ["check", "--steps", "10", "--baseline", str(baseline), *outputs, "train.py"]
    assert report_cli.run_subcommand(argv) == 2
    said = capsys.readouterr()
    assert "NOT JUDGED" in said.out and "the box differed beyond the 25% line" in said.err
    assert "NOT JUDGED" in (tmp_path / "run.md").read_text()
    assert 'failures="0"' in (tmp_path / "run.xml").read_text()

    (tmp_path / "run.jsonl").unlink()
    assert report_cli.run_subcommand([*argv[:-1], "--max-load-change", "100", "train.py"]) == 1
    out = capsys.readouterr().out
    assert "FAILED  samples/s against the baseline" in out
    assert "the box's load may explain it" in out


def test_a_busier_box_that_left_the_job_its_cpu_marks_nothing(tmp_path: Path) -> None:
    """The CPU demo beside two hogs had half the free cores and the same CPU (docs/recording.md):
    others took only cores the job did not want."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_synthetic(a, ranks=2, seconds=60.0, knob_at_s=1000.0, workers=1, busy_pct=QUIET)
    write_synthetic(b, ranks=2, seconds=60.0, knob_at_s=1000.0, workers=1, busy_pct=BUSY,
                    step_ms=300.0)  # fmt: skip
    comparison = compare(load(a), load(b))
    assert comparison.box_change is not None and comparison.box_change.change_pct < -25
    assert comparison.box_note == "" and "load" not in comparison.headline
