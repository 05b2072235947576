"""Rules that name what holds the step back, with the numbers that show it.

Each rule reads one ``Observation`` (the measured steps of one configuration, with the GPU
and CPU figures of the time they ran) and returns a ``Finding`` or None. Findings are ranked
by expected gain times confidence; the first is the headline. A finding proposes ``changes``
(what a knob of that role should become: the autopilot's plan, the diagnosis benchmark's
check) and names in ``rules_out`` the changes it claims will not help: a claim it makes only
with the evidence that proves it, shown in its own evidence.

One module per family (input, gpu, memory, syncs, model, ranks), the readings they share in
``window`` and ``loaders``, the types in ``finding``, and the ordered list of rules in
``registry``. This package re-exports what the rest of the code uses.

docs/advisor.md has every rule, threshold and source; benchmarks/diagnosis/scorecard.py checks each
headline against the measured gain of applying it on the scenario corpus.
"""

from .finding import Change, Finding
from .gpu import gpu_throttled
from .loaders import WAITING_WORKERS_PER_CORE
from .memory import MEMORY_NEAR_LIMIT
from .ranks import straggler
from .registry import HEALTHY, findings
from .syncs import SYNCS_GAIN

__all__ = [
    "HEALTHY",
    "MEMORY_NEAR_LIMIT",
    "SYNCS_GAIN",
    "WAITING_WORKERS_PER_CORE",
    "Change",
    "Finding",
    "findings",
    "gpu_throttled",
    "straggler",
]
