"""The README's install on a CPU box ends with the CPU build (issue 46): torch and torchvision
come from PyTorch's CPU index in one command, before the demo extra, so pip keeps both."""

from __future__ import annotations

import re

from tests.support.paths import REPO


def test_the_cpu_advice_installs_torch_and_torchvision_together_before_the_demo() -> None:
    readme = (REPO / "README.md").read_text()
    cpu = "pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu"
    demo = "pip install -e '.[demo]'"
    assert cpu in readme
    after_cpu = readme[readme.index(cpu) :]
    assert demo in after_cpu  # the demo extra after the CPU wheels, in the same advice
    lone_torch = re.search(r"pip install torch --index-url", readme)
    assert lone_torch is None  # torch alone leaves torchvision to PyPI's CUDA-built wheel
