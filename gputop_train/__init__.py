"""gputop-train: see, live, why a PyTorch training run is not using its GPU fully.

This file must stay import-free: the in-process hook loads the package inside training
jobs where none of the monitor's dependencies are installed.
"""

__version__ = "0.1.0"
