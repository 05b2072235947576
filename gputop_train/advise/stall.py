"""The stalled-job finding, from a stall dump's reading (monitor/stall.py).

Ranks that meet at collectives stall together: when one stops arriving, the others wait in
their next collective. The ranks that did not arrive are those in no collective while the
others wait in one; with every rank in a collective, those with fewer steps (behind, in an
earlier one). A node's monitor sees its own ranks only: where each of them waits and the job
has more (WORLD_SIZE), the rank that did not arrive is on another node; that node's monitor
names it, with its host.
"""

from __future__ import annotations

from typing import Any

from .. import format as fmt
from .rules import Finding


def stall_finding(reading: dict[str, Any] | None) -> Finding | None:
    """The finding of the latest stall dump, while the stall lasts (None once steps resume)."""
    if not reading or reading.get("resolved") or not isinstance(reading.get("ranks"), list):
        return None
    ranks = [r for r in reading["ranks"] if isinstance(r, dict)]
    waiting = [r for r in ranks if r.get("collective")]
    absent = [r for r in ranks if r.get("answered") and not r.get("collective")]
    if waiting and not absent:
        fewest = min((r.get("step") or 0) for r in ranks)
        behind = [r for r in ranks if (r.get("step") or 0) == fewest]
        absent = behind if len(behind) < len(ranks) else []
    gone = [r for r in ranks if not r.get("connected", True) or not r.get("answered")]
    folder = reading.get("folder", "?")
    stalled = f"no rank has finished a step for {fmt.duration(reading.get('stalled_s') or 0)}"
    elsewhere = other_nodes_ranks(reading)
    if absent and waiting:
        names = ", ".join(_who(r) for r in absent)
        title = f"Stalled: {stalled}; {names} did not arrive at the collective"
        action = f"look at {names}'s stack in {folder} (what it does instead of arriving)"
    elif waiting and len(waiting) == len(ranks) and elsewhere:
        others = f"rank{'s' if len(elsewhere) > 1 else ''} {', '.join(map(str, elsewhere))}"
        world = len(ranks) + len(elsewhere)
        title = (
            f"Stalled: {stalled}; every rank here waits in a collective for the job's "
            f"{others} on other nodes (this monitor sees {len(ranks)} of {world})"
        )
        action = (
            f"the rank that did not arrive is among {others}: the stall dump of their node's "
            "monitor (or `gputop-train job`) names it and its host; ssh there"
        )
    elif waiting:
        title = f"Stalled: {stalled}; every rank waits in a collective"
        action = (
            f"the ranks wait in different collectives or a rank's peer is on another node: "
            f"compare the stacks in {folder}"
        )
    else:
        title = f"Stalled: {stalled}; no rank is in a collective"
        action = f"the job is stuck outside the collectives: see every rank's stack in {folder}"
    evidence = tuple(_line(r) for r in ranks)
    if gone:
        evidence += (f"{', '.join(_who(r) for r in gone)}: its hook did not answer (exited?)",)
    # The ranks it names: those that did not arrive, else every rank (all are stalled), so
    # that a per-rank series or alert never reads an empty rank.
    named = [r["rank"] for r in (absent if absent and waiting else ranks)]
    numbered = tuple(r for r in named if isinstance(r, int))
    first = numbered[0] if numbered else None
    return Finding(
        "ranks.stalled", title, evidence, action, None, 0.9, 10.0, rank=first, ranks=numbered
    )


def other_nodes_ranks(reading: dict[str, Any]) -> list[int]:
    """The job's ranks a stall dump does not cover (WORLD_SIZE less its own): on other nodes."""
    world = reading.get("world_size")
    seen = {r.get("rank") for r in reading.get("ranks") or [] if isinstance(r, dict)}
    if not isinstance(world, int) or world <= len(seen):
        return []
    return [r for r in range(world) if r not in seen]


def _who(r: dict[str, Any]) -> str:
    """ "rank 3 on gpu-node-1": the rank and its node, where the dump knows it."""
    who = f"rank {r['rank']}" if r.get("rank") is not None else f"PID {r.get('pid')}"
    return f"{who} on {r['host']}" if r.get("host") else who


def _line(r: dict[str, Any]) -> str:
    if r.get("collective"):
        where = f"waits in {r['collective']}"
    elif r.get("answered"):
        where = "is in no collective"
    else:
        where = "did not answer"
    return f"{_who(r)} {where}, last step {r.get('step')} (hook; stacks: py-spy)"
