"""What one training step computes, counted once: the operators it runs, how its attention is
written, the tokens it embeds and the transformer FLOP formula read from those calls.

A ``TorchDispatchMode`` sees every ATen operator below autograd (forward, backward and the
optimizer's), inside every library, with the real tensors: the counts are measured, not read
from a config. It runs on one step only (probes.FLOP_COUNT_STEP), beside FlopCounterMode.

The analytic count is the one nanoGPT and torchtitan use for MFU:

    FLOPs per token = 6 N + 12 L H Q T

(nanoGPT ``GPT.estimate_mfu`` in karpathy/nanoGPT model.py, after the PaLM paper's appendix B;
torchtitan ``get_num_flop_per_token`` in torchtitan/models/utils.py), N the parameters
without the embedding tables (nanoGPT drops the position table and keeps the token table it
ties to the output layer; torchtitan drops the token table of an untied model: both drop a
table used only for lookups, which is the rule here), L layers, H heads, Q head size, T the
sequence. L H Q T are not read from a config: each attention call of the forward adds its own
12 B H Tq Tk Q (B H Tq Tk the scores' shape), which sums to 12 L H Q T per token.
"""

from __future__ import annotations

import sys
from typing import Any

from . import code_sites

# Fused attention kernels (SDPA's backends: flash, memory-efficient, cuDNN, CPU flash, and the
# private flash/efficient entry points); their backward ops end in "_backward".
_FUSED_ATTENTION = ("_scaled_dot_product", "_flash_attention_forward", "_efficient_attention")
# The attention a checkpointed block runs again in the backward: not the model's FLOPs.
_RECOMPUTED_ATTENTION = (*_FUSED_ATTENTION, "_softmax", "_safe_softmax")
_MATMULS = ("mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "linear")
_COPIES = ("_to_copy", "clone", "contiguous")


class Census:
    """Counts one step's operators (a dispatch mode, entered and left by the agent)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        census = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
                out = func(*args, **(kwargs or {}))
                try:
                    census.note(func, args, out)
                except Exception as error:  # never into the user's step
                    census.error = repr(error)
                return out

        self._mode: Any = _Mode()
        self.error: str | None = None
        self.ops = 0  # operators that launch work (views excluded): ~kernels in eager mode
        self.optimizer_ops: int | None = None
        self.fused_attention = 0  # SDPA-backed attention calls in the forward
        self.manual_attention = 0  # softmax over a square (B, H, T, T) tensor of scores
        # The script's line of the first such softmax (code_sites.user_line): the edit's place.
        self.attention_at: tuple[str, int] | None = None
        self._torch_root = code_sites.torch_dir(sys.modules.get("torch"))
        self.attention_flops = 0  # sum of 12 B H Tq Tk Q over the forward's attention calls
        self.convolutions = 0
        self.fp8_matmuls = 0
        self._score_head_size: int | None = None  # Q of the last q @ k^T seen
        self._root: dict[int, int] = {}  # data_ptr of a cast copy -> the tensor it copies
        self._matmul_operands: set[int] = set()
        # weight ptr -> [rows, index numel, T, calls, weight numel]
        self._embeddings: dict[int, list[int]] = {}
        self.active = False
        # Set by the agent while the step's backward runs: activation checkpointing runs the
        # forward's attention again there, which the model's FLOPs leave out (nanoGPT's and
        # PaLM's MFU count the model's work, not the recomputation).
        self.in_backward = False

    def start(self) -> None:
        self._mode.__enter__()
        self.active = True

    def stop(self) -> None:
        self.active = False
        self._mode.__exit__(None, None, None)

    def optimizer_started(self) -> None:
        self.optimizer_ops = self.ops

    def note(self, func: Any, args: Any, out: Any) -> None:
        if func.is_view:
            return
        self.ops += 1
        name = func.overloadpacket.__name__
        tensors = [a for a in args if hasattr(a, "data_ptr")]
        if name in _COPIES and tensors and hasattr(out, "data_ptr"):
            self._root[out.data_ptr()] = self._resolve(tensors[0].data_ptr())
        elif name in _MATMULS:
            self._matmul(name, tensors, out)
        elif name == "embedding" and len(tensors) >= 2:
            weight, indices = tensors[0], tensors[1]
            entry = self._embeddings.setdefault(
                weight.data_ptr(), [weight.shape[0], 0, 0, 0, weight.numel()]
            )
            entry[1] += indices.numel()
            entry[2] = indices.shape[-1] if indices.dim() >= 2 else entry[2]
            entry[3] += 1
        elif self.in_backward and name.startswith(_RECOMPUTED_ATTENTION):
            return  # a checkpointed block's forward, run again: counted once, in the forward
        elif name.startswith(_FUSED_ATTENTION) and not name.endswith("backward") and tensors:
            q, k = tensors[0], tensors[1] if len(tensors) > 1 else tensors[0]
            if q.dim() == 4:  # (B, H, T, Q)
                batch, heads, tq, head = q.shape
                self.fused_attention += 1
                self.attention_flops += 12 * batch * heads * tq * k.shape[-2] * head
        elif name in ("_softmax", "_safe_softmax") and tensors:
            scores = tensors[0]
            dim = args[1] if len(args) > 1 and isinstance(args[1], int) else -1
            square = scores.dim() == 4 and scores.shape[-1] == scores.shape[-2]
            if square and dim in (-1, 3) and name == "_softmax":
                batch, heads, tq, tk = scores.shape
                self.manual_attention += 1
                if self.attention_at is None:  # from the caller of __torch_dispatch__ out
                    self.attention_at = code_sites.user_line(sys._getframe(2), self._torch_root)
                head = self._score_head_size or 0
                self.attention_flops += 12 * batch * heads * tq * tk * head
        elif name == "convolution":
            self.convolutions += 1

    def _matmul(self, name: str, tensors: list[Any], out: Any) -> None:
        for tensor in tensors:
            self._matmul_operands.add(self._resolve(tensor.data_ptr()))
        if name == "_scaled_mm":
            self.fp8_matmuls += 1
        if name in ("bmm", "baddbmm") and hasattr(out, "shape") and out.dim() == 3:
            first = tensors[-2]  # baddbmm(input, a, b): a is second to last
            if out.shape[-1] == out.shape[-2] and first.dim() == 3:
                self._score_head_size = first.shape[-1]  # q @ k^T: (BH, T, Q) x (BH, Q, T)

    def _resolve(self, pointer: int) -> int:
        seen = 0
        while pointer in self._root and seen < 8:
            pointer, seen = self._root[pointer], seen + 1
        return pointer

    def facts(self, params: list[Any]) -> dict[str, Any]:
        """The step's census and its analytic FLOPs (None with the reason, where not a
        token model). ``params``: the optimizer's parameters."""
        # The full model's parameters whatever the sharding: a DTensor (FSDP2, tensor
        # parallel) has no data pointer of its own (0 for all) and its numel is the global
        # shape's, so it is told apart by its local shard's storage and counted whole.
        unique = {_storage(p): p for p in params}
        sharded = any(_is_dtensor(p) for p in params)
        total = sum(p.numel() for p in unique.values())
        lookups_only = {
            ptr for ptr in self._embeddings if self._resolve(ptr) not in self._matmul_operands
        }
        # A sharded table is looked up in its gathered copy, which is no parameter: its size
        # is the copy's (the full table's).
        embedding_params = sum(
            unique[p].numel() if p in unique else self._embeddings[p][4]
            for p in lookups_only
            if p in unique or sharded
        )
        non_embedding = total - embedding_params
        facts: dict[str, Any] = {
            "ops": self.ops,
            "optimizer_ops": None if self.optimizer_ops is None else self.ops - self.optimizer_ops,
            "fused_attention": self.fused_attention,
            "manual_attention": self.manual_attention,
            "attention_at": code_sites.code_site(*self.attention_at) if self.attention_at else None,
            "convolutions": self.convolutions,
            "fp8_matmuls": self.fp8_matmuls,
            "params": total,
            "non_embedding_params": non_embedding,
        }
        token = _token_embedding(self._embeddings)
        if token is None:
            facts.update(analytic_flops=None, tokens=None, sequence=None)
            facts["analytic_note"] = "no token embedding in the forward: not a token model"
            return facts
        tokens, sequence = token
        if self.manual_attention and not self._score_head_size:
            facts.update(analytic_flops=None, tokens=tokens, sequence=sequence)
            facts["analytic_note"] = "hand-written attention whose q @ k^T was not seen"
            return facts
        facts.update(
            analytic_flops=6 * non_embedding * tokens + self.attention_flops,
            tokens=tokens,
            sequence=sequence,
            analytic_note=None,
        )
        return facts


def _is_dtensor(tensor: Any) -> bool:
    return callable(getattr(tensor, "to_local", None)) and hasattr(tensor, "placements")


def _storage(tensor: Any) -> int:
    """Where a parameter's own values live: a DTensor's local shard's pointer."""
    if _is_dtensor(tensor):
        return int(tensor.to_local().data_ptr())
    return int(tensor.data_ptr())


def _token_embedding(embeddings: dict[int, list[int]]) -> tuple[int, int] | None:
    """(tokens in the step, sequence length) from the largest table looked up with 2-D
    indices (batch x sequence): the token table, not the position table (1-D or 1 x T)."""
    candidates = [e for e in embeddings.values() if e[2] > 0]
    if not candidates:
        return None
    _rows, tokens, sequence, _calls, _size = max(candidates, key=lambda e: (e[0], e[1]))
    return tokens, sequence
