"""A node of 8 busy GPUs, as the module ``pynvml``: the fake NVML (gputop_train/collect/
fake.py) behind the real binding's constants, structures and error classes. With this folder
first on PYTHONPATH, gputop-train and nvitop both read the same node with no GPU at hand
(``benchmarks/frontends/tui_cost.py --fake-node``: the TUI against nvitop on the CPU, issue 47)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from typing import Any

from gputop_train.collect.fake import FakeFunctionNotFound, FakeGpu, FakeNvml, FakeNvmlError

_HERE = str(Path(__file__).resolve().parent)
_spec = importlib.machinery.PathFinder.find_spec(
    "pynvml", [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE]
)
assert _spec is not None and _spec.loader is not None, "nvidia-ml-py is not installed"
_real = importlib.util.module_from_spec(_spec)
_shim, sys.modules[__name__] = sys.modules[__name__], _real  # it finds itself by name
try:
    _spec.loader.exec_module(_real)
finally:
    sys.modules[__name__] = _shim
globals().update({k: v for k, v in vars(_real).items() if not k.startswith("__")})
_errors = _real

GPUS = 8
_node = FakeNvml(
    [
        FakeGpu(
            uuid=f"GPU-5a1e{i:04x}-0000-4000-8000-{i:012d}",
            util=90 - i,
            mem_util=40,
            mem_used=(60 + i) * 2**30,
            power_mw=600_000,
            temp=60 + i,
            gpm={2: 85.0, 3: 40.0, 5: 30.0, 10: 50.0},
        )
        for i in range(GPUS)
    ]
)


def _answered(name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(_node, name)(*args, **kwargs)
        except FakeFunctionNotFound:
            raise _errors.NVMLError_FunctionNotFound() from None
        except FakeNvmlError:
            raise _errors.NVMLError_NotSupported() from None

    call.__name__ = name
    return call


# The library's calls (the binding's own helpers, nvmlExceptionClass..., stay its own).
_CALLS = ("nvmlInit", "nvmlShutdown", "nvmlSystem", "nvmlDevice", "nvmlGpm", "nvmlUnit")
for _name in [n for n in vars(_real) if n.startswith(_CALLS) and callable(vars(_real)[n])]:
    globals()[_name] = _answered(_name)


def _memory_info(handle: int, memory: Any) -> int:
    """The C call nvitop makes through a function pointer: fills the structure given by
    reference (``ctypes.byref``), answers NVML_SUCCESS."""
    gpu = _node.gpus[handle]
    struct = memory._obj
    struct.total, struct.used = gpu.mem_total, gpu.mem_used
    struct.free = gpu.mem_total - gpu.mem_used
    return 0


def _nvmlGetFunctionPointer(name: str) -> Any:
    """nvitop reads memory through the library's function pointer; any other is not found
    (callers fall back to the binding's calls)."""
    if name.startswith("nvmlDeviceGetMemoryInfo"):
        return _memory_info
    raise _errors.NVMLError_FunctionNotFound()


def nvmlInitWithFlags(flags: int) -> None:  # nvitop starts NVML with it
    _node.nvmlInit()
