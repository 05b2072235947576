"""Knobs the hook offers any PyTorch job, with nothing declared in the script.

Once the first optimizer step has run, the hook knows the optimizer, the DataLoader that fed
the step and whether the script enters autocast itself; it finds the top-level model (the
module that holds the optimizer's parameters, not inside another module) and declares one
knob per setting it can change from the outside (docs/knobs.md, "Built-in knobs"). A knob
that does not apply to this job is listed with the reason, and every change to it is refused
with that reason. Like a declared knob, each applies on the training thread at a step
boundary, and one whose apply raises is put back.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import weakref
from collections.abc import Callable
from typing import Any

from . import loader_handover
from .knobs import Knob
from .probes import float32_matmul_precision, set_float32_matmul_precision

# How each change alters the job's numerics, shown with the knob and its outcomes.
TF32_NUMERICS = "alters numerics: fp32 matmuls run as TF32 (10-bit mantissa)"
AUTOCAST_NUMERICS = "alters numerics: matmuls and convolutions in 16-bit (autocast)"
COMPILE_NUMERICS = "alters numerics slightly: fused kernels round differently"
FUSED_NUMERICS = "alters numerics in the last bits: another update kernel"
# The most DataLoader workers a knob offers: one per core, as the advisor sizes them.
MAX_WORKERS = os.cpu_count() or 1
MAX_PREFETCH = 16


class ModelControl:
    """What the hook wraps around the top-level model's forward: autocast and the input
    batches' layout. The wrapper is an instance attribute, removed when neither is on, so the
    model is exactly as the script built it whenever every knob is back at its start."""

    def __init__(self, torch_module: Any, model: Any, device_type: str) -> None:
        self._torch = torch_module
        self._model = weakref.ref(model)
        self.device_type = device_type
        self.autocast = "off"
        self.channels_last_inputs = False
        self.compiled_mode: str | None = None
        self._own = False  # our wrapper is installed
        self._instance_forward: Any = None  # what the instance had as forward before ours
        self.compile_failed: Callable[[str], None] = lambda error: None

    def refresh(self) -> None:
        """Install the forward wrapper when something needs it, remove it when nothing does."""
        model = self._model()
        if model is None:
            raise ValueError("the model is gone")
        needed = self.autocast != "off" or self.channels_last_inputs
        if needed and not self._own:
            # A wrapper someone else set on the instance (accelerate's autocast) is kept under
            # ours and put back after.
            self._instance_forward = model.__dict__.get("forward")
            model.forward = self._wrap(model.forward)
            self._own = True
        elif not needed and self._own:
            if self._instance_forward is None:
                del model.forward  # the class's forward again
            else:
                model.forward = self._instance_forward
            self._own = False

    def _wrap(self, forward: Callable[..., Any]) -> Callable[..., Any]:
        torch = self._torch
        dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}

        def forward_with_knobs(*args: Any, **kwargs: Any) -> Any:
            if self.channels_last_inputs:
                args = tuple(_nhwc(torch, a) for a in args)
                kwargs = {k: _nhwc(torch, v) for k, v in kwargs.items()}
            if self.autocast == "off":
                return forward(*args, **kwargs)
            with torch.autocast(device_type=self.device_type, dtype=dtypes[self.autocast]):
                return forward(*args, **kwargs)

        return forward_with_knobs

    def set_compiled(self, mode: str | None) -> None:
        """torch.compile the model's call in place (``Module.compile``'s way), or restore the
        eager call. A compile that fails at its first call falls back to eager and reports."""
        model = self._model()
        if model is None:
            raise ValueError("the model is gone")
        if mode is None:
            model._compiled_call_impl = None
            self.compiled_mode = None
            return
        options = {} if mode == "default" else {"mode": mode}
        compiled = self._torch.compile(model._call_impl, **options)
        first_call_done = [False]

        def call_compiled(*args: Any, **kwargs: Any) -> Any:
            if first_call_done[0]:
                return compiled(*args, **kwargs)
            try:
                result = compiled(*args, **kwargs)
            except Exception as error:  # the compile failed: this step runs eagerly
                model._compiled_call_impl = None
                self.compiled_mode = None
                self.compile_failed(f"torch.compile failed: {type(error).__name__}: {error}")
                return model._call_impl(*args, **kwargs)
            first_call_done[0] = True
            return result

        model._compiled_call_impl = call_compiled
        self.compiled_mode = mode


def _nhwc(torch_module: Any, value: Any) -> Any:
    if isinstance(value, torch_module.Tensor) and value.dim() == 4 and value.is_floating_point():
        return value.contiguous(memory_format=torch_module.channels_last)
    return value


def find_top_model(torch_module: Any, optimizer: Any) -> Any:
    """The module that holds most of the optimizer's parameters and is nobody's child (the
    DDP wrapper, not the model inside it); None when no module holds them. One pass over the
    collector's objects: a few tens of ms, once."""
    wanted = {id(p) for group in optimizer.param_groups for p in group["params"]}
    module_type = torch_module.nn.Module
    modules = [o for o in gc.get_objects() if issubclass(type(o), module_type)]
    children = {id(c) for m in modules for c in m.children()}
    best, best_count = None, 0
    for module in modules:
        if id(module) in children:
            continue
        count = sum(1 for p in module.parameters() if id(p) in wanted)
        if count > best_count:
            best, best_count = module, count
    return best


def _grad_scaler_in_use(torch_module: Any) -> bool:
    scaler_type = getattr(getattr(torch_module, "amp", None), "GradScaler", None)
    if scaler_type is None:
        return False
    return any(
        issubclass(type(o), scaler_type) and getattr(o, "_enabled", False) for o in gc.get_objects()
    )


class BuiltinKnobs:
    """Builds the built-in knobs of one job and carries out their changes."""

    def __init__(
        self,
        torch_module: Any,
        current_feed: Callable[[], tuple[Any, Any]],
        report_failure: Callable[[str], None],
    ) -> None:
        self._torch = torch_module
        self._current_feed = current_feed  # (loader, live iterator or None) of the last step
        self._report_failure = report_failure  # a change that failed after it applied
        self.control: ModelControl | None = None
        self._optimizer: weakref.ref[Any] | None = None

    def build(self, optimizer: Any, script_autocast: str | None) -> list[Knob]:
        """Every built-in knob for this job, each available or saying why not."""
        torch = self._torch
        self._optimizer = weakref.ref(optimizer)
        model = find_top_model(torch, optimizer)
        no_model = None if model is not None else "no nn.Module holds the optimizer's parameters"
        if model is not None:
            param = next(iter(model.parameters()))
            self.control = ModelControl(torch, model, param.device.type)
            self.control.compile_failed = self._report_failure
        return [
            self._matmul_precision(),
            self._cudnn_benchmark(),
            self._autocast(model, no_model, script_autocast),
            self._compile(model, no_model),
            self._channels_last(model, no_model),
            *self._loader_knobs(),
            self._optimizer_impl(optimizer),
        ]

    # -- global switches -----------------------------------------------------------------

    def _matmul_precision(self) -> Knob:
        torch = self._torch
        current = float32_matmul_precision(torch)
        choices = ("highest", "high") + (("medium",) if current == "medium" else ())

        def apply(value: str) -> None:
            set_float32_matmul_precision(torch, value)

        return Knob(
            "float32_matmul_precision",
            current,
            apply,
            help="torch.set_float32_matmul_precision: high = TF32 matmuls",
            choices=choices,
            role="matmul_precision",
            builtin=True,
            numerics=TF32_NUMERICS,
        )

    def _cudnn_benchmark(self) -> Knob:
        cudnn = self._torch.backends.cudnn

        def apply(value: bool) -> None:
            cudnn.benchmark = value

        return Knob(
            "cudnn_benchmark",
            bool(cudnn.benchmark),
            apply,
            help="torch.backends.cudnn.benchmark: autotune convolutions per input shape",
            role="cudnn_benchmark",
            builtin=True,
        )

    # -- the model --------------------------------------------------------------------------

    def _autocast(self, model: Any, no_model: str | None, script_autocast: str | None) -> Knob:
        scaler = _grad_scaler_in_use(self._torch)
        choices = ("off", "bf16", "fp16") if scaler else ("off", "bf16")
        why_not = no_model or (
            f"the script enters torch.autocast ({script_autocast}) itself: change its dtype there"
            if script_autocast
            else None
        )

        def apply(value: str) -> None:
            control = self._need_control()
            control.autocast = value
            control.refresh()

        return Knob(
            "autocast",
            script_autocast or "off",
            apply,
            help="torch.autocast around the model's forward"
            + ("" if scaler else " (fp16 only with a GradScaler: none in this job)"),
            choices=choices if not script_autocast else (script_autocast, *choices),
            role="precision",
            builtin=True,
            unavailable=why_not,
            numerics=AUTOCAST_NUMERICS,
        )

    def _compile(self, model: Any, no_model: str | None) -> Knob:
        why_not = no_model
        if model is not None and type(model).__name__ == "OptimizedModule":
            why_not = "the script compiles the model itself"
        elif model is not None and getattr(model, "_compiled_call_impl", None) is not None:
            why_not = "the script compiles the model itself (Module.compile)"
        elif not hasattr(self._torch, "compile"):
            why_not = "this torch has no torch.compile"

        def apply(value: str) -> None:
            self._need_control().set_compiled(None if value == "off" else value)

        return Knob(
            "compile",
            "off",
            apply,
            help="torch.compile the model in place (compile time counts as warm-up)",
            choices=("off", "default", "reduce-overhead"),
            role="compile",
            builtin=True,
            unavailable=why_not,
            numerics=COMPILE_NUMERICS,
        )

    def _channels_last(self, model: Any, no_model: str | None) -> Knob:
        torch = self._torch
        convs = [] if model is None else [p for p in model.parameters() if p.dim() == 4]
        why_not = no_model or (None if convs else "the model has no 2-D convolution")
        current = bool(convs) and all(
            p.is_contiguous(memory_format=torch.channels_last) and not p.is_contiguous()
            for p in convs
        )

        def apply(value: bool) -> None:
            control = self._need_control()
            model = control._model()
            if model is None:
                raise ValueError("the model is gone")
            layout = torch.channels_last if value else torch.contiguous_format
            model.to(memory_format=layout)
            control.channels_last_inputs = value
            control.refresh()

        return Knob(
            "channels_last",
            current,
            apply,
            help="the model's weights and its 4-D input batches in NHWC",
            role="channels_last",
            builtin=True,
            unavailable=why_not,
        )

    def _need_control(self) -> ModelControl:
        if self.control is None:
            raise ValueError("no model found")
        return self.control

    # -- the DataLoader ---------------------------------------------------------------------

    def _loader_knobs(self) -> list[Knob]:
        loader, _ = self._current_feed()
        why_not = None
        if loader is None:
            why_not = "no DataLoader fed the training step"
        elif isinstance(loader.dataset, self._torch.utils.data.IterableDataset):
            why_not = "an IterableDataset: its samples cannot be handed to new workers mid-epoch"

        def value(name: str) -> Any:
            return getattr(loader, name, None)

        pin_why_not = why_not or (
            None if self._torch.cuda.is_available() else "pinned memory needs CUDA"
        )
        return [
            Knob(
                "num_workers",
                value("num_workers") or 0,
                self._loader_setter("num_workers"),
                help="DataLoader worker processes (changed within the epoch)",
                minimum=0,
                maximum=max(MAX_WORKERS, value("num_workers") or 0),
                role="workers",
                builtin=True,
                unavailable=why_not,
            ),
            Knob(
                "pin_memory",
                bool(value("pin_memory")),
                self._loader_setter("pin_memory"),
                help="DataLoader pin_memory: page-locked batches, faster copies to the GPU",
                role="pin_memory",
                builtin=True,
                unavailable=pin_why_not,
            ),
            Knob(
                "prefetch_factor",
                value("prefetch_factor") or 0,
                self._loader_setter("prefetch_factor"),
                help="batches each worker prepares ahead (0: no workers)",
                minimum=1,
                maximum=MAX_PREFETCH,
                role="prefetch_factor",
                builtin=True,
                unavailable=why_not,
            ),
            Knob(
                "persistent_workers",
                bool(value("persistent_workers")),
                self._loader_setter("persistent_workers"),
                help="keep the workers between epochs",
                role="persistent_workers",
                builtin=True,
                unavailable=why_not,
            ),
        ]

    def _loader_setter(self, name: str) -> Callable[[Any], None]:
        next_of = self._torch.utils.data.dataloader._BaseDataLoaderIter.__next__
        next_of = getattr(next_of, "__wrapped__", next_of)  # the hook's patch is not re-entered

        def apply(value: Any) -> None:
            loader, iterator = self._current_feed()
            if loader is None:
                raise ValueError("the DataLoader is gone")
            settings = {name: value}
            if iterator is None or name == "persistent_workers":
                loader_handover.change_for_next_epoch(loader, settings)
            else:
                loader_handover.hand_over(self._torch, loader, iterator, settings, next_of)

        return apply

    # -- the optimizer ----------------------------------------------------------------------

    def _optimizer_impl(self, optimizer: Any) -> Knob:
        accepted = inspect.signature(type(optimizer).__init__).parameters
        choices = ["for-loop"]
        if "foreach" in accepted:
            choices.append("foreach")
        if "fused" in accepted:
            choices.append("fused")
        why_not = None if len(choices) > 1 else f"{type(optimizer).__name__} has one implementation"
        current = _optimizer_impl_in_force(optimizer)
        if current not in choices:
            choices.append(current)

        def apply(value: str) -> None:
            # Through the weak reference: a knob must not keep a dropped optimizer (its state
            # and the parameters it holds) alive when the script makes a new one.
            current_optimizer = self._optimizer() if self._optimizer else None
            if current_optimizer is None:
                raise ValueError("the optimizer is gone")
            _set_optimizer_impl(self._torch, current_optimizer, value)

        return Knob(
            "optimizer_impl",
            current,
            apply,
            help=f"{type(optimizer).__name__}'s update: one kernel per tensor (for-loop), "
            "per list (foreach) or one fused kernel",
            choices=tuple(choices),
            role="optimizer",  # the role optimizer.for_loop's change names (docs/knobs.md)
            builtin=True,
            unavailable=why_not,
            numerics=FUSED_NUMERICS,
        )


def _optimizer_impl_in_force(optimizer: Any) -> str:
    group = optimizer.param_groups[0]
    if group.get("fused"):
        return "fused"
    if group.get("foreach") is not None:
        return "foreach" if group["foreach"] else "for-loop"
    # PyTorch's default: foreach when every parameter is on a CUDA device
    on_cuda = all(p.is_cuda for g in optimizer.param_groups for p in g["params"])
    return "foreach" if on_cuda else "for-loop"


def _set_optimizer_impl(torch_module: Any, optimizer: Any, value: str) -> None:
    """Set the update kernel of every group; a fused update keeps its step counts on the
    parameters' device, the others on the CPU (as each would have made them)."""
    fused = value == "fused"
    if fused:
        devices = {p.device.type for g in optimizer.param_groups for p in g["params"]}
        supported = set(_fused_devices(torch_module))
        if not devices <= supported:
            raise ValueError(f"the fused update runs on {sorted(supported)}, not {sorted(devices)}")
    for group in [*optimizer.param_groups, optimizer.defaults]:
        group["foreach"] = value == "foreach"
        if "fused" in group or fused:
            group["fused"] = fused
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            step = state.get("step")
            if isinstance(step, torch_module.Tensor) and not group.get("capturable", False):
                device = param.device if fused else "cpu"
                state["step"] = step.to(device=device, dtype=torch_module.float32)


def _fused_devices(torch_module: Any) -> list[str]:
    with contextlib.suppress(Exception):
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        return list(_get_fused_kernels_supported_devices())
    return ["cuda"]
