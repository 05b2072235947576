"""The real app in a pseudo-terminal, as over SSH: what it writes for each kind of terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time

import pytest

from tests.support.paths import REPO, SCENARIOS
from tests.support.terminal import Terminal

pytest.importorskip("torch")

# SGR colour parameters beyond the 16 ANSI colours: 256-colour (38;5;N) and truecolor (38;2;R;G;B).
EXTENDED_COLOUR = re.compile(r"\x1b\[[0-9;]*[34]8;[25];")
SGR = re.compile(r"\x1b\[([0-9;]*)m")
# The 16 ANSI colours: foreground 30-37 and 90-97, background 40-47 and 100-107.
ANSI_16 = {str(n) for base in (30, 40, 90, 100) for n in range(base, base + 8)}


def run_in_terminal(term: str, seconds: float, **env: str) -> str:
    """Run the TUI on a short CPU job in an 80x24 pty; quit with q, s; return what it wrote."""
    environ = {k: v for k, v in os.environ.items() if k not in ("COLORTERM", "NO_COLOR")}
    environ.update(TERM=term, **env)
    job = [str(SCENARIOS), "sleepy", "batch_ms=5", "step_ms=5", "steps=4000"]
    terminal = Terminal([sys.executable, "-m", "gputop_train", "--no-record", *job], env=environ)
    try:
        # Each key waits for the screen it is meant for: on a loaded machine the dashboard
        # can take seconds to come up, and an `s` sent before the quit dialog is drawn would
        # be lost (and the job run on for its 4000 steps).
        terminal.read(seconds)
        terminal.read(60.0, until=b"samples/s")
        terminal.type(b"q")
        terminal.read(30.0, until=b"Stop job")
        terminal.type(b"s")  # stop the job
        terminal.read(60.0)  # keep reading as it stops: a full pty would block its last writes
    finally:
        terminal.close()
    assert terminal.process.returncode == 130  # the job's exit code: stopped with Ctrl+C
    return terminal.text()


def test_the_linux_console_gets_only_its_16_colours() -> None:
    written = run_in_terminal("linux", seconds=8.0)
    assert "gputop-train" in written and "samples/s" in written  # it drew the dashboard
    colours = {p for m in SGR.finditer(written) for p in m.group(1).split(";")} & ANSI_16
    assert len(colours) >= 6  # in colour,
    assert not EXTENDED_COLOUR.search(written)  # but none the console cannot show


def test_xterm_256color_gets_extended_colours() -> None:
    # The contrast for the test above: the same screens use more than 16 colours here.
    written = run_in_terminal("xterm-256color", seconds=5.0)
    assert EXTENDED_COLOUR.search(written)


# Makes the pty the controlling terminal of a new session, then runs the command: a script's
# shell (no job control), whose own process group is the terminal's foreground.
TAKE_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils' timeout")
def test_under_timeout_from_a_script_the_monitor_runs_headless_and_timeout_returns() -> None:
    """Issue 39: `timeout` puts its command in a process group of its own, in the terminal's
    background; the TUI was stopped there (state T) at its first terminal setting, so the
    SIGTERM never reached the job and `timeout` never returned."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    job = f"{SCENARIOS} sleepy batch_ms=5 step_ms=5 steps=1000000"
    script = f"timeout 10 {sys.executable} -m gputop_train --no-record {job}; echo rc=$?"
    shell = subprocess.Popen(
        [sys.executable, "-c", TAKE_TERMINAL, "sh", "-c", script],
        stdin=slave, stdout=slave, stderr=slave, cwd=REPO, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    output = bytearray()
    try:
        deadline = time.monotonic() + 120  # 10 s of job, then its stop, on a loaded box
        while b"rc=" not in output and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    output.extend(os.read(master, 65536))
                except OSError:
                    break
    finally:
        if shell.poll() is None:
            shell.kill()
        shell.wait()
        os.close(master)
    text = output.decode(errors="replace")
    assert "rc=124" in text, text[-2000:]  # timeout returned, as it does after its SIGTERM
    assert "running headless" in text and "timeout --foreground" in text
    assert "job exit code 143" in text, text[-2000:]  # the SIGTERM reached the job
