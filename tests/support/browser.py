"""A real headless Chromium for the report's tests: a page's screenshot, taken with the network
off, and its pixels counted by colour."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

# The flags of a quiet, sandbox-free, offline headless browser: no GPU, no background calls
# home, and every connection sent to a closed port (the page must need none).
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--proxy-server=http://127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
    # The screenshot waits for the page to settle in virtual time: on a loaded box (load 10+)
    # one was taken with a fifth of the phase lines drawn (95 magenta pixels against ~570).
    "--virtual-time-budget=10000",
)  # fmt: skip


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _offline() -> tuple[str, ...]:
    """``unshare -n`` (a network namespace with no interface but loopback, down) where this
    user may make one: the network is then truly off, not only refused by the flags."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        return (unshare, "-n")
    return ()


def screenshot(page: Path, png: Path, width: int = 1200, height: int = 3000) -> np.ndarray:
    """``page`` drawn by Chromium with the network off; its pixels as RGB floats 0..1."""
    from matplotlib.image import imread

    browser = chromium()
    assert browser is not None
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [*_offline(), browser, *FLAGS, f"--user-data-dir={profile}",
             f"--window-size={width},{height}", f"--screenshot={png}", page.resolve().as_uri()],
            capture_output=True, timeout=120, check=True,
        )  # fmt: skip
    return np.asarray(imread(png))[..., :3]


def pixels_of(image: np.ndarray, colour: str, tolerance: float = 0.08) -> int:
    """How many pixels are within ``tolerance`` (per channel, 0..1) of ``#rrggbb``."""
    rgb = np.array([int(colour[i : i + 2], 16) / 255.0 for i in (1, 3, 5)])
    return int(np.all(np.abs(image - rgb) <= tolerance, axis=-1).sum())


def blended_pixels_of(image: np.ndarray, colour: str, least: float = 0.35) -> int:
    """How many pixels are ``#rrggbb`` blended over white with an opacity of ``least`` or
    more: a one-pixel line that falls between two pixel columns is drawn as two paler ones
    (a dashed phase line read 85-574 pixels of its exact colour as its x moved)."""
    rgb = np.array([int(colour[i : i + 2], 16) / 255.0 for i in (1, 3, 5)])
    room = 1.0 - rgb
    moving = room > 0.2  # the channels the colour moves away from white
    alpha = ((1.0 - image[..., moving]) / room[moving]).mean(axis=-1, keepdims=True)
    blend = 1.0 - alpha * room  # the colour at that opacity over white, every channel
    close = np.all(np.abs(image - blend) <= 0.08, axis=-1)
    return int((close & (alpha[..., 0] >= least)).sum())


def drawn_share(image: np.ndarray) -> float:
    """The share of pixels that are not white: 0 for a blank page."""
    return float(np.any(image < 0.95, axis=-1).mean())
