"""A stand-in for torch.cuda in its own folder, so the sync scanner treats it as library code."""

from __future__ import annotations

import warnings


class FakeCuda:
    """In warn mode a 'sync' issues PyTorch's warning, as torch does from C++."""

    def __init__(self) -> None:
        self.mode = "default"

    def set_sync_debug_mode(self, mode: str) -> None:
        self.mode = mode

    def sync(self) -> None:
        if self.mode == "warn":
            warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=2)
