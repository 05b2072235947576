"""The input thread's patient wait (tui/quiet_input.py): long while the keyboard is quiet, the
asked one after a key (an Escape still ends in 0.1 s), and a quit ends any wait."""

from __future__ import annotations

import os
import selectors
import threading
from collections.abc import Iterator

import pytest
from textual.drivers.headless_driver import HeadlessDriver
from textual.drivers.linux_driver import LinuxDriver

from gputop_train.tui import quiet_input
from gputop_train.tui.quiet_input import PatientSelector, _WakingEvent


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    os.close(read_fd)
    os.close(write_fd)


def test_the_wait_is_long_while_quiet_and_the_asked_one_after_a_key(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    keyboard, typed = pipe
    wake_read, wake_write = os.pipe()
    waits: list[float | None] = []
    real = selectors.SelectSelector.select

    def recorded(
        self: selectors.SelectSelector, timeout: float | None = None
    ) -> list[tuple[selectors.SelectorKey, int]]:
        waits.append(timeout)
        return real(self, 0)  # what is ready now: the test never sleeps

    monkeypatch.setattr(selectors.SelectSelector, "select", recorded)
    selector = PatientSelector(wake_read)
    selector.register(keyboard, selectors.EVENT_READ)
    try:
        assert selector.select(0.1) == []  # nothing typed: from now on, patient
        assert selector.select(0.1) == []
        os.write(typed, b"\x1b")  # a lone Escape
        assert [key.fd for key, _ in selector.select(0.1)] == [keyboard]
        os.read(keyboard, 8)
        assert selector.select(0.1) == []  # the short wait that ends the Escape
        assert waits == [0.1, quiet_input.IDLE_WAIT_S, quiet_input.IDLE_WAIT_S, 0.1]
    finally:
        selector.close()
        os.close(wake_read)
        os.close(wake_write)


def test_quitting_ends_a_patient_wait_at_once(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    keyboard, _ = pipe
    monkeypatch.setattr(quiet_input, "IDLE_WAIT_S", 3600.0)  # a wait only the wake can end
    exiting = _WakingEvent()
    wake_read, wake_write = os.pipe()
    exiting.attach(wake_write)
    selector = PatientSelector(wake_read)
    selector.register(keyboard, selectors.EVENT_READ)
    waiting = threading.Event()

    def input_thread() -> None:  # as Textual's: wait, until the exit event is set
        while not exiting.is_set():
            selector.select(0.1)
            waiting.set()

    thread = threading.Thread(target=input_thread, daemon=True)
    thread.start()
    try:
        assert waiting.wait(timeout=30)  # it has waited once: the next wait is the long one
        exiting.set()
        thread.join(timeout=30)
        assert not thread.is_alive()
    finally:
        exiting.attach(None)
        selector.close()
        os.close(wake_read)
        os.close(wake_write)


def test_only_textuals_linux_driver_is_made_patient() -> None:
    assert quiet_input.quiet_input(HeadlessDriver) is HeadlessDriver
    patient = quiet_input.quiet_input(LinuxDriver)
    assert issubclass(patient, LinuxDriver) and patient is not LinuxDriver
