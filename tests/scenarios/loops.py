"""Training loops with known timings, run under the hook by the tests (CPU torch).

Usage: python loops.py SCENARIO [key=value ...]; the hook is armed by the launcher's
environment (sitecustomize), exactly as for a user's script.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

if os.environ.get("BLOCK_MONITOR_DEPS"):
    # A training environment with torch but none of the monitor's dependencies.
    import importlib.abc

    class _Blocker(importlib.abc.MetaPathFinder):
        blocked = ("textual", "rich", "psutil", "pynvml", "platformdirs")

        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in self.blocked:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
            return None

    sys.meta_path.insert(0, _Blocker())

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


class SleepyDataset(Dataset):
    """Each item costs ``item_ms`` of wall time, like a slow decode."""

    def __init__(self, items: int, item_ms: float) -> None:
        self.items = items
        self.item_s = item_ms / 1000.0

    def __len__(self) -> int:
        return self.items

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.item_s)
        return torch.zeros(4), index % 2


class SleepyBatches(Dataset):
    """Whole batches that each cost ``batch_ms``: one sleep, so the truth is exact."""

    def __init__(self, batches: int, batch: int, batch_ms: float) -> None:
        self.batches, self.batch, self.batch_s = batches, batch, batch_ms / 1000.0

    def __len__(self) -> int:
        return self.batches

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.batch_s)
        return torch.zeros(self.batch, 4), torch.zeros(self.batch, dtype=torch.long)


def _params(argv: list[str]) -> dict[str, Any]:
    """key=value arguments: numbers as floats, anything else (a path) as text."""
    params: dict[str, Any] = {}
    for key, value in (arg.split("=", 1) for arg in argv):
        try:
            params[key] = float(value)
        except ValueError:
            params[key] = value
    return params


def _model() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = torch.nn.Linear(4, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def sleepy(p: dict[str, float]) -> None:
    """DataLoader with known data time per batch; a step with known compute time."""
    model, optimizer = _model()
    batch, steps = int(p.get("batch", 4)), int(p.get("steps", 20))
    dataset = SleepyBatches(steps, batch, p.get("batch_ms", 0))
    loader = iter(DataLoader(dataset, batch_size=None, num_workers=int(p.get("workers", 0))))
    # The loop's own clock, independent of the hook: the truth the tests compare against.
    truth = []
    previous_end = time.perf_counter()
    for _ in range(steps):
        fetch_start = time.perf_counter()
        x, y = next(loader)
        fetch_ms = (time.perf_counter() - fetch_start) * 1000.0
        time.sleep(p.get("step_ms", 40) / 1000.0)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        end = time.perf_counter()
        truth.append({"step_ms": (end - previous_end) * 1000.0, "data_ms": fetch_ms})
        previous_end = end
        optimizer.zero_grad()
    print("TRUTH " + json.dumps(truth), flush=True)


def accumulate(p: dict[str, float]) -> None:
    """Gradient accumulation: several batches per optimizer step."""
    model, optimizer = _model()
    batch, accum, steps = int(p.get("batch", 3)), int(p.get("accum", 4)), int(p.get("steps", 5))
    loader = DataLoader(SleepyDataset(batch * accum * steps, 0), batch_size=batch)
    for i, (x, y) in enumerate(loader):
        torch.nn.functional.cross_entropy(model(x), y).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def no_dataloader(p: dict[str, float]) -> None:
    """Tensors already in place, optimizer steps only; samples declared through the API."""
    import gputop_train.hook

    model, optimizer = _model()
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    for _ in range(int(p.get("steps", 10))):
        time.sleep(p.get("step_ms", 20) / 1000.0)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        gputop_train.hook.count_samples(16)


def late_monitor(p: dict[str, float]) -> None:
    """Train, then idle so that a monitor can connect after the steps happened."""
    sleepy({"batch_ms": 0, "step_ms": 1, "steps": p.get("steps", 20)})
    time.sleep(p.get("idle_s", 3))


def broken_hook(p: dict[str, float]) -> None:
    """The hook's own code raises on every step: training must finish regardless."""
    from gputop_train.hook.patches import current_agent

    agent = current_agent()

    def explode(*_: object) -> None:
        raise RuntimeError("injected hook fault")

    agent._memory = explode  # type: ignore[method-assign]
    sleepy({"batch_ms": 0, "step_ms": 1, "steps": p.get("steps", 20)})
    print(f"trained {int(p.get('steps', 20))} steps")


def knobbed(p: dict[str, float]) -> None:
    """A loop with a live knob: the step sleeps ``step_ms``, each batch takes ``batch_ms`` to
    load (0 by default); callbacks log their thread."""
    import threading

    import gputop_train.hook

    state = {"step_ms": 5}
    calls = []

    def set_step_ms(value: int) -> None:
        if value == 13:
            raise ValueError("13 is unlucky")
        calls.append(threading.current_thread() is threading.main_thread())
        state["step_ms"] = value

    gputop_train.hook.knob("step_ms", 5, set_step_ms, minimum=1, maximum=100, help="sleep")
    model, optimizer = _model()
    batches = SleepyBatches(int(p.get("steps", 200)), 4, p.get("batch_ms", 0))
    loader = DataLoader(batches, batch_size=None)
    for x, y in loader:
        time.sleep(state["step_ms"] / 1000.0)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    print("callbacks on the training thread:", calls, flush=True)


def ddp(p: dict[str, float]) -> None:
    """One torchrun rank: DDP over a DistributedSampler's share of the batches; gloo on the
    CPU, or NCCL with one GPU per rank with ``cuda=1``. Rank ``slow_rank`` (none by default),
    or every rank of node ``slow_node``, is slowed on purpose: ``slow_data_ms`` more to load
    each batch, ``slow_step_ms`` more work in each step's forward (its compute: a host gap
    before the forward is its input)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    cuda = bool(p.get("cuda", 0))
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    width = int(p.get("width", 4))  # a wider layer gives the GPUs some work
    model = DistributedDataParallel(torch.nn.Linear(width, 2).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch, steps = int(p.get("batch", 8)), int(p.get("steps", 40))
    items = batch * 16 * dist.get_world_size()  # 16 steps an epoch; epochs until ``steps``
    data = TensorDataset(torch.randn(items, width), torch.randint(0, 2, (items,)))
    # ``slow_node``: every rank of that node (torchrun's GROUP_RANK) slowed alike.
    slowed = dist.get_rank() == int(p.get("slow_rank", -1)) or os.environ.get("GROUP_RANK") == str(
        int(p.get("slow_node", -1))
    )
    slow_data_s = p.get("slow_data_ms", 0) / 1000.0 if slowed else 0.0

    def collate(items: list[Any]) -> Any:
        time.sleep(slow_data_s)
        return torch.utils.data.default_collate(items)

    loader = DataLoader(
        data, batch_size=batch, sampler=DistributedSampler(data), collate_fn=collate
    )
    step_s = p.get("step_ms", 20) / 1000.0
    slow_step_s = p.get("slow_step_ms", 0) / 1000.0 if slowed else 0.0
    if slow_step_s:
        model.register_forward_pre_hook(lambda module, args: time.sleep(slow_step_s))
    done = 0
    while done < steps:
        for x, y in loader:
            time.sleep(step_s)
            loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            done += 1
            if done == steps:
                break
    print(f"rank {dist.get_rank()} of {dist.get_world_size()} done", flush=True)
    # Every rank done before any tears down: without this barrier, torch 2.14.1's gloo aborted
    # rank 0 at exit ("terminate called without an active exception") in 3 of 12 plain
    # torchrun runs with a slowed rank on the dev box, no hook involved; 0 of 24 with it.
    dist.barrier()
    dist.destroy_process_group()


def with_eval(p: dict[str, float]) -> None:
    """A training loader, and every ``every`` steps a full validation pass over another one
    (as trainers do): the validation batches are not training data."""
    model, optimizer = _model()
    train = DataLoader(SleepyBatches(int(p.get("steps", 30)), 8, 2), batch_size=None)
    val = DataLoader(SleepyBatches(int(p.get("val_batches", 5)), 32, 20), batch_size=None)
    every = int(p.get("every", 10))
    for step, (x, y) in enumerate(train, start=1):
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % every == 0:
            with torch.no_grad():
                for vx, _ in val:
                    model(vx)


def autocast_loop(p: dict[str, float]) -> None:
    """A loop whose forward runs under CPU autocast in bfloat16."""
    model, optimizer = _model()
    loader = DataLoader(SleepyBatches(int(p.get("steps", 10)), 4, 0), batch_size=None)
    for x, y in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def forever(p: dict[str, float]) -> None:
    """Trains until interrupted; says so on the way out."""
    try:
        while True:
            sleepy({"batch_ms": 0, "step_ms": 5, "steps": 10})
    except KeyboardInterrupt:
        print("job got KeyboardInterrupt", flush=True)
        sys.exit(130)


def folds(p: dict[str, float]) -> None:
    """K-fold training: a new model and optimizer per fold, every earlier one kept alive (in a
    list, as scripts that compare folds do), ``steps`` steps each."""
    kept = []
    for _ in range(int(p.get("folds", 3))):
        model, optimizer = _model()
        kept.append((model, optimizer))
        for _ in range(int(p.get("steps", 8))):
            torch.nn.functional.cross_entropy(model(torch.zeros(4, 4)), torch.zeros(4).long())
            optimizer.step()
            optimizer.zero_grad()
    print(f"folds trained {len(kept)}", flush=True)


def dropped(p: dict[str, float]) -> None:
    """Train, drop the model and optimizer, and say whether anything still holds them."""
    import gc
    import weakref

    model, optimizer = _model()
    for _ in range(int(p.get("steps", 12))):
        model(torch.ones(4, 4)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    refs = weakref.ref(model), weakref.ref(optimizer)
    del model, optimizer
    gc.collect()
    print("still held:", [ref() is not None for ref in refs], flush=True)


def replaced_loaders(p: dict[str, float]) -> None:
    """A new DataLoader with persistent workers each round, the old one dropped (a script that
    rebuilds its loader per epoch or per setting): say how many worker processes are alive."""
    import psutil

    model, optimizer = _model()
    data = TensorDataset(torch.randn(512, 4), torch.randn(512, 1))
    workers = int(p.get("workers", 2))
    for _ in range(int(p.get("rounds", 4))):
        loader = DataLoader(data, batch_size=8, num_workers=workers, persistent_workers=True)
        for step, (x, y) in enumerate(loader):
            (model(x) - y).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            if step == 5:
                break
    del loader
    time.sleep(0.5)  # a dropped iterator's workers take a moment to exit
    print("live workers:", len(psutil.Process().children()), flush=True)


def gan(p: dict[str, float]) -> None:
    """Two optimizers on one thread, each stepping once an iteration (a GAN's D then G)."""
    disc, disc_opt = _model()
    gen, gen_opt = _model()
    for _ in range(int(p.get("steps", 10))):
        for model, optimizer in ((disc, disc_opt), (gen, gen_opt)):
            model(torch.ones(4, 4)).sum().backward()
            optimizer.step()
            optimizer.zero_grad()


def two_trainers(p: dict[str, Any]) -> None:
    """The main thread trains (batches of 4); after its first step a second thread trains a
    model of its own (batches of 8) side by side, from its own first step on."""
    import threading

    main_stepped, other_stepped = threading.Event(), threading.Event()

    def train(steps: int, batch: int, stepped: threading.Event, wait: threading.Event) -> None:
        model, optimizer = _model()
        for x, y in DataLoader(SleepyBatches(steps, batch, 1), batch_size=None):
            time.sleep(0.002)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
            stepped.set()
            wait.wait()

    other = threading.Thread(
        target=lambda: (main_stepped.wait(), train(40, 8, other_stepped, main_stepped)),  # type: ignore[func-returns-value]
        name="second",
    )
    other.start()
    train(int(p.get("steps", 30)), 4, main_stepped, other_stepped)
    other.join()
    print("both trained", flush=True)


# A step of fixed CPU work (a small MLP, one thread): ~5-10 ms on a laptop core.
def steady(p: dict[str, float]) -> None:
    """Trains until interrupted or ``seconds`` pass, appending each step's end time (the
    job's own clock, time.perf_counter) as a float64 to ``times`` when given; declares a
    knob. For the attack tests and benchmarks/frontends/attacks.py."""
    import struct

    import gputop_train.hook

    gputop_train.hook.knob("width", 256, lambda value: None, minimum=8, maximum=1024)
    model = torch.nn.Sequential(*(torch.nn.Linear(256, 256) for _ in range(4)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    batches = DataLoader(torch.utils.data.TensorDataset(torch.randn(512, 256)), batch_size=64)
    times = open(str(p["times"]), "ab", buffering=0) if "times" in p else None  # noqa: SIM115
    deadline = time.monotonic() + p.get("seconds", 3600)
    try:
        while time.monotonic() < deadline:
            for (x,) in batches:
                model(x).square().mean().backward()
                optimizer.step()
                optimizer.zero_grad()
                if times is not None:
                    times.write(struct.pack("d", time.perf_counter()))
    except KeyboardInterrupt:
        pass
    print("steady done", flush=True)


def closefds(p: dict[str, Any]) -> None:
    """Daemonizing code mid-run: after ``close_at`` steps, close every descriptor above 2
    (os.closerange), then write ``files`` checkpoint files in ``dir``, each open across
    several steps, and read each back. Prints the files intact and the steps trained."""
    import resource

    model, optimizer = _model()
    x, y = torch.randn(4, 4), torch.randint(0, 2, (4,))
    close_at, files = int(p.get("close_at", 20)), int(p.get("files", 6))
    chunk = bytes(range(256)) * 64

    def step() -> None:
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        time.sleep(p.get("step_ms", 20) / 1000.0)

    for _ in range(close_at):
        step()
    os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    intact = 0
    for index in range(files):
        path = os.path.join(str(p["dir"]), f"checkpoint-{index}.bin")
        with open(path, "wb") as out:
            for _ in range(4):  # the file is open while the hook's thread runs
                out.write(chunk)
                step()
        with open(path, "rb") as back:
            intact += back.read() == chunk * 4
    for _ in range(int(p.get("after", 20))):
        step()
    print(f"checkpoints intact {intact} of {files}", flush=True)


def hook_state(p: dict[str, float]) -> None:
    """Train a few steps, then say whether the hook is active."""
    sleepy({"batch_ms": 0, "step_ms": 1, "steps": 3})
    from gputop_train.hook.patches import current_agent

    agent = current_agent()
    print("hooked:", agent is not None and agent.active and agent.enabled)


if __name__ == "__main__":
    torch.set_num_threads(1)  # steadier timings on small CI machines
    print(f"scenario {sys.argv[1]} pid {os.getpid()}", flush=True)
    globals()[sys.argv[1]](_params(sys.argv[2:]))
