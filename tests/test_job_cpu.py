"""The input rules reason from the job's own CPU and the cores free to it (affinity, cgroup
quota, what other processes use), not from the machine's busy share: scripted observations
and process samples, so the verdicts hold on any machine, loaded or not."""

from __future__ import annotations

from pathlib import Path

from gputop_train import events, wire
from gputop_train.advise import rules
from gputop_train.collect.cpu_room import cgroup_quota
from gputop_train.samples import ProcSample
from gputop_train.session import stats
from gputop_train.session.model import Session
from tests.support.observations import RUNG0, headline, ids, observe

CPU = wire.Model(cuda=False, autocast="off", param_dtype="float32", compiled=False)
# The script on the loaded 2-core box: a Dataset sleeping 5 ms per item, no workers,
# the training process at about 20% CPU, data-wait 67%; other users keep the box busy.
SLEEPING_DATASET = dict(
    RUNG0,
    step_data_wait_pct=67.0,
    workers=0,
    worker_cpu_pct=None,
    main_cpu_pct=20.0,
    job_cpu_pct=20.0,
    system_cpu_pct=98.0,
    cpu_count=2,
    model=CPU,
    gpu_name=None,
    batch_shape=(16, 3, 64, 64),
    batch_dtype="torch.float32",
)


def test_a_sleep_bound_dataset_on_a_busy_box_gets_workers_not_cheaper_samples() -> None:
    o = observe(**SLEEPING_DATASET)
    finding = headline(o)
    assert finding.id == "input.more_workers"
    # Workers enough to overlap the wait: 1 / (1 - 0.67) = 3.03 -> 4 (4 workers ran 5.3x).
    assert finding.changes == (rules.Change("workers", 4),)
    evidence = " ".join(finding.evidence)
    assert "0.0 of 2 cores free to the job" in evidence
    assert "other processes 1.8" in evidence and "the job uses 0.2 cores" in evidence
    assert "at 20% CPU" in evidence  # the training process that loads
    assert not {"input.cpu_bound", "input.uint8", "input.contended"} & set(ids(o))


def test_idle_workers_on_a_busy_box_are_not_told_more_workers_will_not_help() -> None:
    # Attached through py-spy: 4 workers at 3% CPU each, the box busy with other work.
    o = observe(
        **{
            **SLEEPING_DATASET,
            "workers": 4,
            "worker_cpu_pct": 3.0,
            "job_cpu_pct": 30.0,
            "main_cpu_pct": 18.0,
            "cpu_count": 16,
            "system_cpu_pct": 96.0,
        },
        data_wait_source="py-spy",
    )
    found = rules.findings(o)
    assert found[0].id == "input.idle_workers"
    assert found[0].changes[0].role == "workers" and found[0].changes[0].value > 4
    assert all("workers" not in f.rules_out for f in found)
    assert all("will not help" not in f.action for f in found)
    assert "other processes 15.1" in " ".join(found[0].evidence)


def test_the_jobs_own_saturation_still_rules_out_workers() -> None:
    # 2 busy workers and the training process fill the 2-core box themselves.
    o = observe(
        **{
            **SLEEPING_DATASET,
            "workers": 2,
            "worker_cpu_pct": 90.0,
            "main_cpu_pct": 15.0,
            "job_cpu_pct": 195.0,
        }
    )
    assert headline(o).id == "input.uint8" and headline(o).rules_out == ("workers",)
    assert "input.more_workers" not in ids(o)


def test_busy_loaders_behind_a_cpu_hog_are_told_who_holds_the_cores() -> None:
    # 2 workers busy on what they get, other processes holding most of the 8 cores.
    o = observe(
        **{
            **SLEEPING_DATASET,
            "workers": 2,
            "worker_cpu_pct": 88.0,
            "job_cpu_pct": 190.0,
            "cpu_count": 8,
            "system_cpu_pct": 99.0,
        }
    )
    finding = headline(o)
    assert finding.id == "input.uint8"  # float images on the CPU: cheaper samples still pay
    assert "other processes hold" in finding.title
    assert "other processes use 6.0 cores" in finding.action
    assert finding.rules_out == () and "will not help" not in finding.action
    assert "input.more_workers" not in ids(o)


def test_an_affinity_or_quota_smaller_than_the_machine_bounds_the_workers() -> None:
    # 4 busy workers on a 16-core box that is mostly idle, but the job may use 6 cores.
    o = observe(
        **{**RUNG0, "workers": 4, "worker_cpu_pct": 95.0, "main_cpu_pct": 40.0},
        job_cpu_pct=420.0,
        usable_cores=6.0,
        system_cpu_pct=27.0,
    )
    finding = headline(o)
    assert finding.id == "input.more_workers"
    assert finding.changes == (rules.Change("workers", 6),)  # 4 + 1.8 free, rounded
    assert "1.8 of 6 (of 16: affinity, cgroup quota) cores free" in " ".join(finding.evidence)


def test_the_session_measures_the_whole_job_and_its_room() -> None:
    clock = [100.0]
    session = Session(clock=lambda: clock[0])
    session.apply(events.CoresCounted(4))

    def proc(pid: int, role: str, cpu: float) -> ProcSample:
        return ProcSample(pid, 1, "python", role, cpu, None, None, None, "running")

    for _ in range(3):
        clock[0] += 1.0
        tree = (proc(10, "launcher", 5.0), proc(11, "main", 30.0), proc(12, "worker", 10.0))
        session.apply(events.ProcsSampled(tree, 75.0, usable_cores=2.0))
    ticks = session._proc_ticks  # the advisor's process samples
    room = stats.cpu_room(list(ticks))
    assert room.job_cpu_pct == 45.0 and room.usable_cores == 2.0
    # Recorded and replayed with the room.
    item = events.ProcsSampled((proc(11, "main", 30.0),), 75.0, usable_cores=2.0)
    kind, payload = events.encode(item)
    assert events.decode({"kind": kind, **payload}) == item


def test_cgroup_quotas_v1_and_v2_are_read_along_the_path(tmp_path: Path) -> None:
    proc, root = tmp_path / "proc", tmp_path / "cg"
    (proc / "7").mkdir(parents=True)
    (proc / "7" / "cgroup").write_text("0::/job/step\n")
    (root / "job" / "step").mkdir(parents=True)
    (root / "job" / "cpu.max").write_text("300000 100000\n")  # the parent: 3 cores
    (root / "job" / "step" / "cpu.max").write_text("max 100000\n")
    assert cgroup_quota(7, proc, root) == 3.0
    (proc / "7" / "cgroup").write_text("4:cpu,cpuacct:/docker/abc\n")
    v1 = root / "cpu,cpuacct"  # the container's own view: its path is not there
    v1.mkdir()
    (v1 / "cpu.cfs_quota_us").write_text("150000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_quota(7, proc, root) == 1.5
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_quota(7, proc, root) is None
