"""An input thread that sleeps while the keyboard is idle (Textual's Linux driver).

Textual's input thread waits for a key at most 0.1 s at a time, to check whether the app is
quitting and to end a lone Escape: ten wake-ups a second with nothing to read. That thread
cost 0.11% of a core of the replay's 1.1% (benchmarks/frontends/tui_cost.py --threads, dev box,
docs/benchmarks.md §5), where nvitop's has none. Here the wait is the short one only after
input (so an Escape still ends within 0.1 s, as before) and ``IDLE_WAIT_S`` while the keyboard
is quiet; quitting writes to a pipe the wait also watches, so it ends at once.

It reaches a private part of Textual (the driver module's ``selectors`` and its
``exit_event``): ``quiet_input`` keeps Textual's own driver wherever those are not as expected.
"""

from __future__ import annotations

import os
import selectors
import threading
from types import SimpleNamespace
from typing import Any

from textual.driver import Driver

# The input thread's wait once the keyboard is quiet: a key still wakes it at once, and a
# quit wakes it through the pipe; only this thread's idle wake-ups follow it (10/s → 1/s).
IDLE_WAIT_S = 1.0

try:
    from textual.drivers import linux_driver
except ImportError:  # not a POSIX Textual: its own driver
    linux_driver = None  # type: ignore[assignment]


class _WakingEvent(threading.Event):
    """The driver's exit event: setting it also wakes the input thread's wait (the pipe is
    written under a lock the thread takes before closing it: never a write to a reused fd)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._wake_fd: int | None = None

    def attach(self, fd: int | None) -> None:
        with self._lock:
            self._wake_fd = fd

    def set(self) -> None:
        super().set()
        with self._lock:
            if self._wake_fd is not None:
                os.write(self._wake_fd, b"x")


class PatientSelector(selectors.SelectSelector):
    """Waits ``IDLE_WAIT_S`` instead of the asked timeout while nothing was read, the asked one
    after input; the wake pipe (written once, at exit) ends every wait and is never reported."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self._wake_fd = wake_fd
        self._quiet = False
        super().register(wake_fd, selectors.EVENT_READ)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        wait = IDLE_WAIT_S if self._quiet and timeout is not None else timeout
        found = super().select(wait)
        ready = [(key, mask) for key, mask in found if key.fd != self._wake_fd]
        self._quiet = not ready
        return ready


_current = threading.local()  # the wake pipe of the input thread being started


def _selector() -> selectors.BaseSelector:
    """What the driver's input thread builds: ours on our thread, Textual's own elsewhere."""
    made: PatientSelector | None = getattr(_current, "selector", None)
    return made if made is not None else selectors.SelectSelector()


def _shape_fits() -> bool:
    """The internals this relies on, as Textual 8 has them."""
    if linux_driver is None:
        return False
    driver = getattr(linux_driver, "LinuxDriver", None)
    return (
        driver is not None
        and isinstance(getattr(linux_driver, "selectors", None), (type(selectors), SimpleNamespace))
        and callable(getattr(driver, "run_input_thread", None))
        and callable(getattr(driver, "disable_input", None))
    )


def quiet_input(driver_class: type[Driver]) -> type[Driver]:
    """``driver_class`` with the patient input thread where it is Textual's Linux driver and
    its internals are as expected; otherwise ``driver_class`` itself."""
    if not _shape_fits() or not issubclass(driver_class, linux_driver.LinuxDriver):
        return driver_class
    shim = SimpleNamespace(**vars(selectors))  # the module, with its SelectSelector ours
    shim.SelectSelector = _selector
    linux_driver.selectors = shim  # type: ignore[assignment]
    base: Any = driver_class

    class QuietInputDriver(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.exit_event = _WakingEvent()

        def run_input_thread(self) -> None:
            read_fd, write_fd = os.pipe()
            event = self.exit_event
            _current.selector = PatientSelector(read_fd)
            if isinstance(event, _WakingEvent):
                event.attach(write_fd)
            try:
                super().run_input_thread()
            finally:
                _current.selector = None
                if isinstance(event, _WakingEvent):
                    event.attach(None)
                os.close(read_fd)
                os.close(write_fd)

    QuietInputDriver.__name__ = QuietInputDriver.__qualname__ = f"Quiet{driver_class.__name__}"
    return QuietInputDriver
