"""The job never pays for a bad client (issue 13's attack run, repeated).

Each attack of benchmarks/frontends/attacks.py runs against one live CPU job under the hook while an
honest monitor stays connected. After each: the job trains on, a new monitor is served its
hello and new steps, the honest monitor was never dropped, the job grew by less than 50 MB,
and a flooding client was cut off. What each attack costs in step time is measured by
``python benchmarks/frontends/attacks.py`` (docs/security.md), not asserted here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from benchmarks.frontends import attacks
from gputop_train.hook.listener import MAX_CLIENTS, SEND_PERIOD_S

pytest.importorskip("torch")

# The first test of the module also waits for the job to import torch and take 20 steps (over
# 60 s beside other work, and pytest-timeout's 120 s ended that wait before the fixture could
# say what failed on the 2-core box beside two hogs, 2026-12-06): the start gets its own
# deadline, and each test the time to reach it and still run.
START_S = 240.0
pytestmark = pytest.mark.timeout(START_S + 60)

ATTACK_S = 2.0
# The attack run's bound on the job's memory (issue 13): 2000 idle clients once added 3 GB.
MAX_RSS_GROWTH_BYTES = 50 * 2**20
# Attacks that send as fast as the socket takes: each must end with the client cut off.
FLOODS = (
    "nested_json",
    "non_finite_values",
    "poisoned_history",
    "malformed_flood",
    "endless_line",
    "scan_syncs_flood",
)


@pytest.fixture(scope="module")
def live_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[attacks.LiveJob]:
    workdir = tmp_path_factory.mktemp("attacks")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUTOP_TRAIN_RUNTIME_DIR", str(workdir / "run"))
        job = attacks.LiveJob(workdir)
    try:
        job.wait_until_training(timeout_s=START_S)
        yield job
    finally:
        code = job.stop()
        assert code == 0, (workdir / "job.log").read_text()[-2000:]


@pytest.mark.parametrize("name", [name for name in attacks.ATTACKS if name != "control"])
def test_the_job_and_its_listener_survive_the_attack(live_job: attacks.LiveJob, name: str) -> None:
    pid = live_job.process.pid
    rss_before = live_job.rss_bytes()
    steps_before = len(live_job.step_ends())
    outcome = attacks.ATTACKS[name](live_job.path, ATTACK_S)

    assert live_job.process.poll() is None, "the job died"
    served, hello_bytes = attacks.fresh_monitor_sees_steps(live_job.path)
    assert served, "the listener no longer serves a new monitor"
    # Refused requests stay out of the knob history that every hello carries.
    assert 0 < hello_bytes < 64 * 1024
    assert live_job.rss_bytes() - rss_before < MAX_RSS_GROWTH_BYTES
    assert live_job.client.connected_pids == {pid}, "the honest monitor was dropped"
    assert len(live_job.step_ends()) > steps_before  # training went on meanwhile
    if name in FLOODS:
        assert outcome.cut_off >= 1, "a flooding client was never cut off"
    if name in ("idle_connections", "trickling_clients"):
        assert outcome.served_at_end <= MAX_CLIENTS - 1  # the honest monitor holds one


def test_the_honest_monitor_saw_the_refusals_and_its_steps_kept_coming(
    live_job: attacks.LiveJob,
) -> None:
    def told() -> int:
        notices = live_job.session.snapshot(600.0).notices
        return sum("over its budget of commands" in text for text in notices)

    before = told()
    assert attacks.fresh_monitor_sees_steps(live_job.path)[0]  # earlier attacks' queue is gone
    attacks.ATTACKS["malformed_flood"](live_job.path, 3.0)
    deadline = time.monotonic() + 10
    while told() == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert told() > before
    ends = live_job.step_ends()
    rows = live_job.session.steps()
    # Caught up: behind the job by at most what it steps in two of the hook's send periods.
    per_two_sends = sum(1 for t in ends if t > ends[-1] - 2 * SEND_PERIOD_S)
    assert rows and abs(rows[-1].step - len(ends)) <= per_two_sends + 20


def test_knobs_survive_values_json_forbids(live_job: attacks.LiveJob) -> None:
    attacks.ATTACKS["non_finite_values"](live_job.path, 1.0)
    knobs = {k.name: k.value for k in live_job.session.snapshot(60.0).knobs}
    assert knobs.get("width") in (256, 128)  # as declared, or as a valid request set it
