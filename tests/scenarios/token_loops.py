"""Training loops without a DataLoader, written the way their users write them, each
printing its own meter (``TRUTH <json>``) for tests/test_step_breakdown.py and
tests/test_forward_counts.py. Run: python token_loops.py NAME key=value ...
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
from torch import nn

VOCAB = 64
# One intra-op thread: on a shared 2-core box torch's thread pool spins against the other
# jobs and a 1 ms step takes 200 ms (dev box, 2026-11-24).
torch.set_num_threads(1)


class TinyGPT(nn.Module):
    """nanoGPT's interface: forward(idx, targets) -> (logits, loss)."""

    def __init__(self, width: int = 32, work_ms: float = 0.0) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.head = nn.Linear(width, VOCAB)
        self.work_ms = work_ms

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> tuple:
        if self.work_ms:
            time.sleep(self.work_ms / 1000.0)  # a known forward time
        logits = self.head(self.embed(idx))
        loss = None
        if targets is not None:
            loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        return logits, loss


class MaskedLM(nn.Module):
    """Hugging Face's interface: forward(input_ids=, attention_mask=, labels=)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.head = nn.Linear(16, VOCAB)

    def forward(self, input_ids, attention_mask=None, labels=None):
        logits = self.head(self.embed(input_ids))
        loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), labels.view(-1))
        return {"loss": loss, "logits": logits}


def params(argv: list[str]) -> dict[str, float]:
    return {k: float(v) for k, v in (a.split("=", 1) for a in argv)}


def nanogpt(p: dict[str, float]) -> list[dict]:
    """A memmap-style get_batch (random windows of one long token array) that takes a known
    time, gradient accumulation, a forward that takes a known time."""
    batch, block, accum = int(p.get("batch", 4)), int(p.get("block", 16)), int(p.get("accum", 1))
    steps, get_ms = int(p.get("steps", 20)), p.get("get_ms", 0.0)
    data = torch.randint(0, VOCAB, (100_000,))
    model = TinyGPT(work_ms=p.get("fwd_ms", 0.0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        if get_ms:
            time.sleep(get_ms / 1000.0)
        starts = torch.randint(len(data) - block - 1, (batch,))
        x = torch.stack([data[i : i + block] for i in starts])
        y = torch.stack([data[i + 1 : i + 1 + block] for i in starts])
        return x, y

    truth, last = [], time.perf_counter()
    for _ in range(steps):
        data_s = 0.0
        for _ in range(accum):
            started = time.perf_counter()
            x, y = get_batch()
            data_s += time.perf_counter() - started
            _, loss = model(x, y)
            (loss / accum).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        now = time.perf_counter()
        # nanoGPT's own meter: tokens per iteration = batch x block x accumulation.
        truth.append(
            {
                "tokens": batch * block * accum,
                "samples": batch * accum,
                "step_ms": (now - last) * 1000.0,
                "data_ms": data_s * 1000.0,
            }
        )
        last = now
    return truth


def masked(p: dict[str, float]) -> list[dict]:
    """Padded batches with an attention mask: tokens are the non-padding ones."""
    steps, accum = int(p.get("steps", 10)), int(p.get("accum", 1))
    model = MaskedLM()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(0)
    truth = []
    for _ in range(steps):
        tokens = 0
        for _ in range(accum):
            lengths = torch.randint(1, 13, (6,), generator=generator)
            ids = torch.randint(0, VOCAB, (6, 12), generator=generator)
            mask = (torch.arange(12)[None, :] < lengths[:, None]).long()
            tokens += int(mask.sum())
            out = model(input_ids=ids, attention_mask=mask, labels=ids)
            out["loss"].backward()
        optimizer.step()
        optimizer.zero_grad()
        truth.append({"tokens": tokens, "samples": 6 * accum})
    return truth


def no_tensor(p: dict[str, float]) -> list[dict]:
    """The model makes its own inputs: forward() takes no tensor."""

    class SelfFed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(4, 1)

        def forward(self) -> torch.Tensor:
            return self.layer(torch.randn(8, 4)).pow(2).mean()

    model = SelfFed()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(int(p.get("steps", 8))):
        model().backward()
        optimizer.step()
        optimizer.zero_grad()
    return []


def two_models(p: dict[str, float]) -> list[dict]:
    """An encoder and a decoder called one after the other, under one optimizer."""
    encoder, decoder = nn.Linear(4, 4), nn.Linear(4, 1)
    optimizer = torch.optim.SGD([*encoder.parameters(), *decoder.parameters()], lr=0.1)
    for _ in range(int(p.get("steps", 8))):
        decoder(encoder(torch.randn(8, 4))).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    return []


def two_optimizers(p: dict[str, float]) -> list[dict]:
    """A GAN: the discriminator sees real and fake batches, two optimizers step."""
    generator, critic = nn.Linear(4, 4), nn.Linear(4, 1)
    g_opt = torch.optim.SGD(generator.parameters(), lr=0.1)
    d_opt = torch.optim.SGD(critic.parameters(), lr=0.1)
    for _ in range(int(p.get("steps", 8))):
        fake = generator(torch.randn(8, 4))
        (critic(torch.randn(8, 4)).mean() - critic(fake.detach()).mean()).backward()
        d_opt.step()
        d_opt.zero_grad()
        critic(fake).mean().backward()
        g_opt.step()
        g_opt.zero_grad()
    return []


def backward_only(p: dict[str, float]) -> list[dict]:
    """Gradients computed, never applied: no optimizer steps."""
    model = nn.Linear(4, 1)
    for _ in range(int(p.get("steps", 8))):
        model(torch.randn(8, 4)).pow(2).mean().backward()
    return []


def compiled(p: dict[str, float]) -> list[dict]:
    """torch.compile (the eager backend: no compiler on the CPU test box)."""
    batch, block = 4, 16
    module = TinyGPT()
    model = torch.compile(module, backend="eager")
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-3)
    for _ in range(int(p.get("steps", 8))):
        x = torch.randint(0, VOCAB, (batch, block))
        _, loss = model(x, x)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return [{"tokens": batch * block, "samples": batch}]


def compiled_in_place(p: dict[str, float]) -> list[dict]:
    model = TinyGPT()
    model.compile(backend="eager")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(int(p.get("steps", 8))):
        x = torch.randint(0, VOCAB, (4, 16))
        model(x, x)[1].backward()
        optimizer.step()
        optimizer.zero_grad()
    return []


def ddp(p: dict[str, float]) -> list[dict]:
    """DistributedDataParallel, one process on gloo, as torchrun would start rank 0."""
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    batch, block, accum = 4, 16, int(p.get("accum", 2))
    model = nn.parallel.DistributedDataParallel(TinyGPT())
    raw_model = model.module  # noqa: F841  (nanoGPT keeps both)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(int(p.get("steps", 8))):
        for micro in range(accum):
            model.require_backward_grad_sync = micro == accum - 1
            x = torch.randint(0, VOCAB, (batch, block))
            model(x, x)[1].backward()
        optimizer.step()
        optimizer.zero_grad()
    dist.destroy_process_group()
    return [{"tokens": batch * block * accum, "samples": batch * accum}]


def with_eval(p: dict[str, float]) -> list[dict]:
    """nanoGPT's estimate_loss: eval-mode, no-grad forwards every few steps."""
    batch, block = 4, 16
    model = TinyGPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(int(p.get("steps", 12))):
        if step % 5 == 0:
            model.eval()
            with torch.no_grad():
                for _ in range(3):
                    x = torch.randint(0, VOCAB, (16, block))
                    model(x, x)
            model.train()
        x = torch.randint(0, VOCAB, (batch, block))
        model(x, x)[1].backward()
        optimizer.step()
        optimizer.zero_grad()
    return [{"tokens": batch * block, "samples": batch}]


def counted(p: dict[str, float]) -> list[dict]:
    """count_samples / count_tokens override what the forward receives."""
    import gputop_train.hook as hook

    model = TinyGPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(int(p.get("steps", 6))):
        x = torch.randint(0, VOCAB, (4, 16))
        model(x, x)[1].backward()
        hook.count_samples(3)
        hook.count_tokens(40)
        optimizer.step()
        optimizer.zero_grad()
    return [{"tokens": 40, "samples": 3}]


def ema(p: dict[str, float]) -> list[dict]:
    """An EMA of the model (torch's AveragedModel deep-copies it) evaluated every step, and
    the whole model saved with torch.save, as scripts do once the hook has found it."""
    import io

    from torch.optim.swa_utils import AveragedModel

    model = TinyGPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    averaged = None
    for step in range(int(p.get("steps", 8))):
        x = torch.randint(0, VOCAB, (4, 16))
        model(x, x)[1].backward()
        optimizer.step()
        optimizer.zero_grad()
        if step == 2:  # the hook found the model at step 1's end
            averaged = AveragedModel(model)
            torch.save(model, io.BytesIO())
        if averaged is not None:
            averaged.update_parameters(model)
            averaged(torch.randint(0, VOCAB, (2, 16)))  # grad on, train mode: not the model
    copied = averaged.module if averaged is not None else None
    hooks = len(copied._forward_pre_hooks) + len(copied._forward_hooks) if copied else -1
    print(f"copied hooks {hooks}", flush=True)
    return [{"tokens": 4 * 16, "samples": 4}]


def folds(p: dict[str, float]) -> list[dict]:
    """Cross-validation: a new model and optimizer per fold, each fold its own batch size."""
    steps = int(p.get("steps", 6))
    for fold in range(int(p.get("folds", 2))):
        model = TinyGPT()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for _ in range(steps):
            x = torch.randint(0, VOCAB, (4 + fold, 16))
            model(x, x)[1].backward()
            optimizer.step()
            optimizer.zero_grad()
    return [{"samples": 4 + fold} for fold in range(int(p.get("folds", 2)))]


class SlowBackward(torch.autograd.Function):
    """Identity whose backward sleeps a known time: the last of the backward's work."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(0.01)
        return grad


def autograd_backward(p: dict[str, float]) -> list[dict]:
    """``torch.autograd.backward(loss)`` called directly, through a reentrant checkpoint (whose
    backward runs a backward of its own) before 10 ms of backward work."""
    from torch.utils.checkpoint import checkpoint

    embed, block = nn.Embedding(VOCAB, 16), nn.Linear(16, 16)
    head = nn.Linear(16, VOCAB)
    model = nn.ModuleDict({"embed": embed, "block": block, "head": head})
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = model

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = SlowBackward.apply(embed(x))
            h = checkpoint(block, h, use_reentrant=True)
            return nn.functional.cross_entropy(head(h).view(-1, VOCAB), x.view(-1))

    net = Model()
    for _ in range(int(p.get("steps", 12))):
        x = torch.randint(0, VOCAB, (4, 16))
        torch.autograd.backward(net(x))
        optimizer.step()
        optimizer.zero_grad()
    return []


if __name__ == "__main__":
    name, rest = sys.argv[1], sys.argv[2:]
    result = globals()[name](params(rest))
    print("TRUTH " + json.dumps(result), flush=True)
