"""The workload probes, each run on one step (docs/advisor.md, MFU): the FLOP counter with a
census of the step's operators beside it (workload.py), the matmul peak of the precision in
force, measured once per precision (matmul_peak.py), and one step's kernels
(kernel_profile.py). Their parts make one frame, ``wire.Workload``, republished whole as
each part arrives.

They are apart from the agent because they fail apart: a dispatch mode or a profiler that
raises stops these probes alone, said once, while the step rows and the rest of the hook go
on (MFU then falls back to the FLOP counter). The agent says when a step is due
(probe_schedule.py); this runs them.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

from .. import wire
from .kernel_profile import KernelProfile
from .matmul_peak import MatmulPeak, matmul_precision
from .probes import FlopCounter, force_eager
from .workload import Census


class WorkloadProbes:
    """Starts and ends the probes of a counted or profiled step; publishes what they find.
    ``census`` is the census running now (the agent marks its backward on it)."""

    __slots__ = (
        "_census_hook",
        "_flops",
        "_notice",
        "_off",
        "_parts",
        "_peak",
        "_peaks_measured",
        "_profile",
        "_publish",
        "_restore_stance",
        "_torch",
        "census",
    )

    def __init__(
        self,
        torch_module: Any,
        publish: Callable[[wire.Frame], None],
        notice: Callable[[str], None],
    ) -> None:
        self._torch = torch_module
        self._publish = publish
        self._notice = notice
        self._flops = FlopCounter()
        self.census: Census | None = None
        self._census_hook: Any = None  # the optimizer pre-hook that marks the census
        self._peak: MatmulPeak | None = None
        self._profile = KernelProfile()
        self._parts: dict[str, Any] = {}  # census, profile, peak: the frame's parts so far
        self._off = False  # stopped for good after an internal error
        self._restore_stance: Any = None  # undoes force_eager after the counted step
        self._peaks_measured: set[str] = set()  # precisions whose matmul peak was measured

    def start_count(self, step: int) -> bool:
        """The FLOP counter and the census over the coming step (after ``step``). A compiled
        model runs that step eagerly (probes.force_eager); False where that cannot be done:
        no count then, said in the workload frame."""
        try:
            self._restore_stance = force_eager(self._torch)
        except Exception as reason:  # no count rather than a compiled model run eagerly
            self._update(step, census={"skipped": str(reason)})
            return False
        self._flops.start()
        self._guard(self._start_census)
        return True

    def start_profile(self) -> None:
        """One step's kernels (a CUDA job)."""
        self._guard(self._profile.start)

    def end(
        self,
        step: int,
        samples: int | None,
        optimizer: Any,
        autocast: str | None,
        cuda_in_use: Callable[[], bool],
    ) -> None:
        """At ``step``'s end: the probes that covered it stop and say what they found."""
        if self.census is not None:  # entered inside the FLOP counter: left first
            self._guard(self._end_census, step, self.census, optimizer, autocast)
        if self._flops.active:
            self._publish(wire.Flops(step=step, flops=self._flops.stop(), samples=samples))
            self._restore_compiled()
            self._guard(self._measure_peak, step, cuda_in_use)
        if self._profile.active:
            self._guard(lambda: self._update(step, profile=self._profile.stop()))
        if self._peak is not None and self._peak.pending:
            self._guard(self._poll_peak, step, self._peak)

    def _guard(self, probe: Callable[..., Any], *args: Any) -> None:
        """The workload probes fail alone: said once, they stop; the rest of the hook and the
        training go on."""
        if self._off:
            return
        try:
            probe(*args)
        except Exception as error:
            self._off = True
            census, self.census = self.census, None
            with contextlib.suppress(Exception):
                if census is not None and census.active:
                    census.stop()
            with contextlib.suppress(Exception):
                if self._census_hook is not None:
                    self._census_hook.remove()
            with contextlib.suppress(Exception):
                if self._profile.active:
                    self._profile.stop()
            self._notice(
                "the workload probes (FLOP census, kernel profile, matmul peak) stopped after "
                f"an internal error: {error!r}; MFU falls back to the FLOP counter"
            )

    def _start_census(self) -> None:
        census = Census()
        optimizer_module = sys.modules["torch.optim.optimizer"]
        self._census_hook = optimizer_module.register_optimizer_step_pre_hook(
            lambda optimizer, args, kwargs: census.optimizer_started()
        )
        census.start()
        self.census = census

    def _end_census(self, step: int, census: Census, optimizer: Any, autocast: str | None) -> None:
        """The census's facts, with the precision its matmuls ran in."""
        self.census = None
        census.stop()
        if self._census_hook is not None:
            self._census_hook.remove()
            self._census_hook = None
        params = [p for group in optimizer.param_groups for p in group.get("params", ())]
        facts = census.facts(params)
        param = next((p for p in params if p.dtype.is_floating_point), None)
        param_dtype = str(param.dtype).removeprefix("torch.") if param is not None else None
        precision = matmul_precision(self._torch, autocast, param_dtype)
        if census.fp8_matmuls:
            precision = "fp8"
        facts.update(matmul_precision=precision, census_error=census.error)
        self._update(step, census=facts)

    def _restore_compiled(self) -> None:
        """After the counted step, compiled code runs again."""
        restore, self._restore_stance = self._restore_stance, None
        if restore is not None:
            restore()

    def _measure_peak(self, step: int, cuda_in_use: Callable[[], bool]) -> None:
        """The matmul peak of the precision now in force, once per precision; enqueued after
        the FLOP counter stopped (its matmuls are not the step's)."""
        precision = (self._parts.get("census") or {}).get("matmul_precision")
        if not precision or precision in self._peaks_measured or not cuda_in_use():
            return
        if self._peak is not None and self._peak.pending:
            return
        self._peaks_measured.add(precision)
        self._peak = MatmulPeak(self._torch)
        unmeasured = self._peak.enqueue(precision)
        if unmeasured is not None:
            self._update(step, peak=unmeasured)

    def _poll_peak(self, step: int, peak: MatmulPeak) -> None:
        measured = peak.poll()
        if measured is not None:
            self._update(step, peak=measured)

    def _update(self, step: int, **parts: Any) -> None:
        self._parts.update(parts)
        self._publish(
            wire.Workload(
                step=step,
                census=self._parts.get("census"),
                profile=self._parts.get("profile"),
                peak=self._parts.get("peak"),
            )
        )
