"""gputop-train's samples/s, tokens/s and step breakdown against a nanoGPT-style loop's own
meter, in the same run (issue 26's done-when: within 3%; the parts add up to the step).

The loop is nanoGPT's shape, written as its users write it: a memmap-style ``get_batch``
(random windows of one uint16 token array on the host, pinned, copied ``non_blocking``),
bf16 autocast, gradient accumulation, AdamW, no DataLoader. It writes its own meter (each
iteration's end time, tokens and duration) to a file; the monitor runs it headless with JSON
output. Then, for the last status line, the loop's own tokens/s over the iterations that
ended in that line's window is compared with the line's.

    python -m benchmarks.diagnosis.tokens_meter --out DIR [--sleep-ms 20] [--seconds 40]
    python -m benchmarks.diagnosis.tokens_meter --loop ...  # the loop alone (what the monitor runs)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def loop(args: argparse.Namespace) -> None:
    import torch
    from torch import nn

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    vocab, block, width, layers = 8192, args.block, args.width, args.layers
    data = torch.randint(0, vocab, (20_000_000,), dtype=torch.int32).to(torch.int16).numpy()

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.mlp = nn.Sequential(
                nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, 8, c // 8).transpose(1, 2) for z in (q, k, v))
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(block, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.head = nn.Linear(width, vocab, bias=False)

        def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> tuple:
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for layer in self.blocks:
                x = layer(x)
            logits = self.head(x)
            loss = None
            if targets is not None:
                loss = nn.functional.cross_entropy(logits.view(-1, vocab), targets.view(-1))
            return logits, loss

    model = GPT().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=device == "cuda")

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:  # nanoGPT's, from its train.py
        if args.sleep_ms:
            time.sleep(args.sleep_ms / 1000.0)  # a slow disk or tokenizer
        ix = torch.randint(len(data) - block - 1, (args.batch,))
        x = torch.stack([torch.from_numpy(data[i : i + block].astype("int64")) for i in ix])
        y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + block].astype("int64")) for i in ix])
        if device == "cuda":
            return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(
                device, non_blocking=True
            )
        return x, y

    tokens_per_iter = args.accum * args.batch * block  # nanoGPT's own count
    meter, started = [], time.time()
    t0 = time.perf_counter()
    while time.time() - started < args.seconds:
        data_s = 0.0
        for _ in range(args.accum):
            fetch = time.perf_counter()
            x, y = get_batch()
            data_s += time.perf_counter() - fetch
            with torch.autocast(device, dtype=torch.bfloat16):
                _, loss = model(x, y)
            (loss / args.accum).backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device == "cuda" and args.log_sync:
            loss.item()  # nanoGPT's per-log-interval sync, here every iteration
        t1 = time.perf_counter()
        meter.append(
            {
                "t": time.time(),
                "dt_ms": (t1 - t0) * 1000.0,
                "data_ms": data_s * 1000.0,
                "tokens": tokens_per_iter,
            }
        )
        t0 = t1
    Path(args.meter).write_text(
        json.dumps({"samples_per_iter": args.accum * args.batch, "meter": meter})
    )


def compare(status: dict, own: dict) -> dict:
    """The line's figures beside the loop's own over the iterations of the line's window:
    those that ended in it, up to the last step the monitor had (``total_steps``; rows
    arrive every 0.5 s)."""
    end, window = status["t"], status["window_s"]
    seen = own["meter"][: status["total_steps"]]
    inside = [m for m in seen if end - window < m["t"] <= end]
    seconds = sum(m["dt_ms"] for m in inside) / 1000.0
    own_tokens = sum(m["tokens"] for m in inside) / seconds
    own_samples = len(inside) * own["samples_per_iter"] / seconds
    parts = status.get("step_parts") or {}
    named = sum(parts.get(f"{k}_ms") or 0.0 for k in ("data", "forward", "backward", "optimizer"))
    mean_dt = seconds * 1000.0 / len(inside)
    return {
        "iterations": len(inside),
        "own_tokens_per_s": own_tokens,
        "tokens_per_s": status["tokens_per_s"],
        "tokens_ratio": status["tokens_per_s"] / own_tokens if status["tokens_per_s"] else None,
        "own_samples_per_s": own_samples,
        "samples_per_s": status["samples_per_s"],
        "samples_ratio": status["samples_per_s"] / own_samples if status["samples_per_s"] else None,
        "own_step_ms": mean_dt,
        "own_data_pct": 100.0 * sum(m["data_ms"] for m in inside) / (seconds * 1000.0),
        "host_gap_pct": status.get("host_gap_pct"),
        "parts": parts,
        "parts_span_over_own_step": parts.get("step_ms", 0.0) / mean_dt if parts else None,
        "named_parts_over_own_step": named / mean_dt if parts else None,
        "memory": status.get("memory"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loop", action="store_true", help="run the loop itself")
    parser.add_argument("--out", type=Path, default=Path("/tmp/tokens_meter"))
    parser.add_argument("--meter", default="")
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--sleep-ms", type=float, default=0.0)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--block", type=int, default=512)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--accum", type=int, default=4)
    parser.add_argument("--log-sync", action="store_true")
    parser.add_argument("--name", default="nanogpt")
    args = parser.parse_args()
    if args.loop:
        loop(args)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    meter = args.out / f"{args.name}-meter.json"
    command = [
        sys.executable,
        "-m",
        "gputop_train",
        "--headless",
        "--format",
        "json",
        "--interval",
        "5",
        "--window",
        "20",
        "--",
        sys.executable,
        __file__,
        "--loop",
        "--meter",
        str(meter),
        "--seconds",
        str(args.seconds),
        "--sleep-ms",
        str(args.sleep_ms),
        "--batch",
        str(args.batch),
        "--block",
        str(args.block),
        "--width",
        str(args.width),
        "--layers",
        str(args.layers),
        "--accum",
        str(args.accum),
        *(["--log-sync"] if args.log_sync else []),
    ]
    run = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=os.environ)
    (args.out / f"{args.name}-headless.jsonl").write_text(run.stdout)
    (args.out / f"{args.name}-stderr.txt").write_text(run.stderr[-20000:])
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    running = [s for s in lines if s.get("type") == "status" and s.get("job_running")]
    result = {"name": args.name, "args": vars(args) | {"out": str(args.out)}}
    if running and meter.exists():
        result |= compare(running[-1], json.loads(meter.read_text()))
    print(json.dumps(result, indent=1, default=str))
    (args.out / f"{args.name}-result.json").write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
