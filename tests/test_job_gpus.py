"""The job's GPUs, not the node's (issue 37): on a fake node of 8 GPUs the job's figures,
its headline, its memory headroom and its MFU's peak are over the GPUs it uses; the others
are shown apart with who uses them; a shared or throttled GPU stands out."""

from __future__ import annotations

import pytest

from gputop_train import views
from gputop_train.export.prometheus import PREFIX
from gputop_train.record.summary import markdown, summarize
from gputop_train.session import job_gpus
from tests.support.gpu_node import GIB, Node, node_session, uuid
from tests.support.metrics import exposition, samples


def test_a_one_gpu_job_on_eight_reads_its_own_gpu() -> None:
    session, _ = node_session(Node(gpus=8, ranks={4242: 1}))
    snap = session.snapshot()
    assert snap.job_gpus is not None and snap.job_gpus.indices == (1,)
    assert not snap.job_gpus.assumed and "NVML lists" in snap.job_gpus.reason
    assert snap.gpu.util_pct == 100 and snap.gpu.gpus == 1
    assert snap.gpu.mem_used_bytes == 62 * GIB and snap.gpu.power_w == 612.0
    shown = {g.index: g for g in snap.gpus}
    assert len(shown) == 8 and [g.index for g in snap.gpus if g.job] == [1]
    assert shown[1].pids == (4242,) and shown[0].util_pct == 0


def test_the_headline_of_a_busy_one_gpu_job_on_two_is_gpu_bound_not_launch_bound() -> None:
    session, _ = node_session(Node(gpus=2, ranks={4242: 0}))
    view = views.view_of(session.snapshot())
    assert view.headline is not None and view.headline.id == "gpu.bound"
    assert "cpu.launch_bound" not in [f.id for f in view.findings]


def test_cuda_visible_devices_1_maps_by_the_hooks_uuid_where_nvml_cannot_see_the_pid() -> None:
    # A container: NVML's PIDs are the host's, so only the hook's device UUID tells.
    node = Node(gpus=8, ranks={77: 1}, visible="1", nvml_sees_job=False, hook_reports_uuid=True)
    snap = node_session(node)[0].snapshot()
    assert snap.job_gpus is not None and snap.job_gpus.indices == (1,)
    assert "hook reports the device by UUID" in snap.job_gpus.reason
    assert snap.gpu.util_pct == 100


def test_before_the_job_touches_a_gpu_the_assumed_ones_are_said_with_why() -> None:
    visible = node_session(Node(gpus=8, visible="3,5", touched=False, nvml_sees_job=False))[0]
    chosen = visible.snapshot().job_gpus
    assert chosen is not None and chosen.assumed and chosen.indices == (3, 5)
    assert "CUDA_VISIBLE_DEVICES=3,5" in chosen.reason
    every = node_session(Node(gpus=8, touched=False, nvml_sees_job=False))[0].snapshot()
    assert every.job_gpus is not None and every.job_gpus.indices == tuple(range(8))
    assert "every GPU (8)" in every.job_gpus.reason


def test_visible_devices_by_uuid_prefix_and_a_mig_name_that_maps_to_none() -> None:
    uuids = [uuid(i) for i in range(4)]
    assert job_gpus.visible_indices(uuids[2][:12], uuids) == (2,)
    assert job_gpus.visible_indices("2,0", uuids) == (2, 0)
    assert job_gpus.visible_indices("1,-1,3", uuids) == (1,)  # CUDA stops at -1
    assert job_gpus.visible_indices("MIG-abc", uuids) is None


def test_other_processes_on_the_jobs_gpu_and_on_others_are_shown_with_who() -> None:
    others = {1: [(900, "alice", 9.0, 45)], 4: [(901, "bob", 20.0, 80)]}
    session, _ = node_session(Node(gpus=8, ranks={4242: 1}, others=others))
    snap = session.snapshot()
    shown = {g.index: g for g in snap.gpus}
    (intruder,) = shown[1].others
    assert (intruder.pid, intruder.user, intruder.mem_bytes) == (900, "alice", 9 * GIB)
    assert intruder.sm_pct == 45 and shown[1].job_mem_bytes == 62 * GIB
    assert shown[4].others[0].user == "bob" and not shown[4].job
    view = views.view_of(snap)
    shared = next(f for f in view.findings if f.id == "gpu.shared")
    assert "GPU 1" in shared.title and "PID 900 (alice)" in shared.title
    assert not any("GPU 4" in line for line in shared.evidence)  # not the job's GPU
    fields = views.status_fields(view)
    assert fields["gpus"][1]["others"][0]["user"] == "alice"
    assert fields["job_gpus"] == {
        "indices": [1],
        "assumed": False,
        "reason": snap.job_gpus.reason,
        "processes_listed": True,
    }


def test_no_shared_finding_when_the_others_are_on_other_gpus() -> None:
    others = {4: [(901, "bob", 20.0, 80)]}
    view = views.view_of(node_session(Node(gpus=8, ranks={4242: 1}, others=others))[0].snapshot())
    assert "gpu.shared" not in [f.id for f in view.findings]


def test_one_throttled_gpu_among_eight_stands_out() -> None:
    ranks = {1000 + i: i for i in range(8)}
    session, _ = node_session(Node(gpus=8, ranks=ranks, throttled=5))
    snap = session.snapshot()
    shown = {g.index: g for g in snap.gpus}
    assert shown[5].throttle == ("sw_thermal",) and shown[5].sm_clock_mhz == 1200
    assert all(shown[i].throttle == () for i in range(8) if i != 5)
    assert [g.ranks for g in snap.gpus] == [(i,) for i in range(8)]
    view = views.view_of(snap)
    throttled = next(f for f in view.findings if f.id == "gpu.throttled")
    assert throttled.title.startswith("GPU 5 runs throttled")


def test_memory_headroom_is_the_fullest_job_gpu_never_a_sum() -> None:
    others = {2: [(900, "alice", 15.0, 0)]}  # GPU 2 holds the job's 62 GiB and 15 more
    session, _ = node_session(Node(gpus=4, ranks={11: 1, 12: 2}, others=others))
    snap = session.snapshot()
    assert snap.gpu.mem_used_bytes == 77 * GIB  # GPU 2's own
    assert snap.gpu.mem_total_bytes == 80 * GIB


def _with_flops(node: Node) -> views.View:
    node.facts = [  # each rank counts its own step: 8 samples, 200 TFLOP
        {"type": "model", "cuda": True, "autocast": "bfloat16", "step": 2},
        {"type": "flops", "flops": 2 * 10**14, "samples": 8, "step": 3},
    ]
    return views.view_of(node_session(node)[0].snapshot())


def test_mfu_of_two_ranks_on_two_gpus_is_one_ranks_not_doubled() -> None:
    one = _with_flops(Node(gpus=2, ranks={11: 0}))
    two = _with_flops(Node(gpus=2, ranks={11: 0, 12: 1}))
    assert one.mfu_pct is not None and two.mfu_pct is not None
    assert two.mfu_pct == pytest.approx(one.mfu_pct)
    assert two.achieved_tflops == pytest.approx(2 * one.achieved_tflops)
    assert two.efficiency.gpus == 2 and two.efficiency.ranks == 2
    assert two.efficiency.per_gpu_tflops == pytest.approx(one.achieved_tflops)
    fields = views.status_fields(two)["mfu"]
    assert fields["gpus"] == 2 and fields["per_gpu_tflops"] == pytest.approx(714, rel=0.01)


def test_prometheus_marks_the_jobs_gpus_and_the_others_share_to_join_dcgm_on_uuid() -> None:
    others = {1: [(900, "alice", 9.0, 45)], 4: [(901, "bob", 20.0, 80)]}
    text = exposition(node_session(Node(gpus=8, ranks={4242: 1}, others=others))[0])
    job = {
        dict(labels)["UUID"]: value for labels, value in samples(text, PREFIX + "gpu_job").items()
    }
    assert job == {uuid(i): float(i == 1) for i in range(8)}
    shared = samples(text, PREFIX + "gpu_other_sm_ratio")
    assert {dict(labels)["gpu"]: value for labels, value in shared.items()} == {"1": 0.45, "4": 0.8}
    counts = samples(text, PREFIX + "gpu_other_processes")
    assert sum(counts.values()) == 2 and len(counts) == 8


def test_the_summary_has_a_row_per_gpu_and_the_fullest_gpus_memory_peak() -> None:
    others = {1: [(900, "alice", 9.0, 45)]}
    session, _ = node_session(Node(gpus=4, ranks={11: 1, 12: 2}, others=others))
    summary = summarize(session, {"host": "node"})
    assert summary["gpu_mem_peak_bytes"] == 71 * GIB  # GPU 1: the job's 62 and alice's 9
    text = markdown(summary)
    gpus = text.split("## GPUs")[1]
    rows = [line for line in gpus.splitlines() if line.startswith("| ") and "GiB" in line]
    assert len(rows) == 4 and "PID 900 alice 9.0 GiB SM 45%" in rows[1]
    assert "The job's GPUs: 1-2, NVML lists" in text
    assert "| 71.0 GiB |" in text.split("## Phases")[1]  # the phase's peak: one GPU's


def test_a_stray_context_on_another_gpu_is_not_the_jobs_where_the_hook_names_its_device() -> None:
    uuids = [uuid(i) for i in range(2)]
    # NVML lists the rank on GPU 0 too (a context made before its set_device).
    chosen = job_gpus.select(uuids, {7: {0, 1}}, {7}, {7: uuid(1)}, None)
    assert chosen.indices == (1,) and not chosen.assumed
    without_hook = job_gpus.select(uuids, {7: {0, 1}}, {7}, {}, None)
    assert without_hook.indices == (0, 1)


def test_a_straggler_whose_gpu_another_process_shares_is_named_with_that_cause() -> None:
    # Rank 1's GPU runs another user's job at 45% of its SM time; rank 0 waits 60 ms a step
    # in the all-reduce for rank 1, which waits 1 ms.
    node = Node(
        gpus=2,
        ranks={11: 0, 12: 1},
        others={1: [(900, "alice", 9.0, 45)]},
        comm_ms={11: 60.0, 12: 1.0},
    )
    view = views.view_of(node_session(node)[0].snapshot())
    straggler = next(f for f in view.findings if f.id == "ranks.straggler")
    assert straggler.title.startswith("Straggler: rank 1 shares its GPU with another process")
    assert any(
        "PID 900 (alice, 45% SM) take 45% of its SM time" in line for line in straggler.evidence
    )
