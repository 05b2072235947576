"""The reference run of docs/playbook: ResNet-18 on a fake CIFAR-10, with a flag per rung.

Rung 0 (the baseline) is the defaults on a GPU: batch 32, no workers, fp32, PIL resize to
224 + ToTensor + Normalize on the CPU. Each flag is one rung of the optimization ladder:

    python demos/resnet.py                                         # rung 0
    python demos/resnet.py --workers 8                             # rung 1
    python demos/resnet.py --workers 8 --pin-memory                # rung 2
    python demos/resnet.py --workers 8 --pin-memory --batch-size 512 --input uint8   # rung 4
    python demos/resnet.py --workers 4 --pin-memory --batch-size 1024 --input gpu-resize \
        --precision bf16 --channels-last --compile                 # rung 8

Without CUDA it runs the CPU configuration: a small CNN on 32-pixel images resized from
320-pixel JPEGs decoded per image, so that, as at rung 0 on a GPU, the input is the bottleneck
at first and more workers pay (README: what a CPU run shows). ``--model resnet18 --jpeg-side
0 --image-size 224`` is the GPU configuration on the CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

try:  # under gputop-train the hook is loaded; the demo runs the same without it
    import gputop_train.hook as hook
except ImportError:
    hook = None

DATASET_IMAGES = 10_000  # the article's fake CIFAR-10
# Distinct JPEGs of the CPU configuration, cycled: each takes ~20 ms to make at start.
DISTINCT_JPEGS = 64
LOG_EVERY_S = 5.0


@dataclass
class Config:
    device: str
    workers: int
    pin_memory: bool
    batch_size: int
    input: str  # "float" | "uint8" | "gpu-resize"
    precision: str  # "fp32" | "fp16" | "bf16"
    compile: bool
    channels_last: bool
    set_to_none: bool
    sync_loss: bool
    image_size: int
    model: str = "resnet18"  # "resnet18" | "small" (the CPU configuration)
    jpeg_side: int = 0  # images stored as JPEGs of this side, decoded per item (0: raw 32x32)


class FakeCifar(Dataset):
    """Random 32x32 RGB images with labels 0-9, prepared on the CPU as the config says; with
    ``jpeg_side``, stored as JPEGs of that side and decoded per item, as a photo dataset is."""

    def __init__(
        self, images: int, input_mode: str, image_size: int, seed: int = 0, jpeg_side: int = 0
    ) -> None:
        rng = np.random.default_rng(seed)
        self.images = rng.integers(0, 256, size=(images, 32, 32, 3), dtype=np.uint8)
        self.labels = rng.integers(0, 10, size=images).tolist()
        self.jpegs = (
            [_jpeg(self.images[i], jpeg_side, rng) for i in range(DISTINCT_JPEGS)]
            if jpeg_side
            else []
        )
        self.set_input(input_mode, image_size)

    def set_input(self, input_mode: str, image_size: int) -> None:
        """What the CPU does per image; takes effect in workers started after the change."""
        self.input_mode = input_mode
        if input_mode == "float":
            self.transform = transforms.Compose(
                [
                    transforms.Resize(image_size),
                    transforms.ToTensor(),
                    transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
                ]
            )
        elif input_mode == "uint8":
            self.transform = transforms.Compose(
                [transforms.Resize(image_size), transforms.PILToTensor()]
            )
        else:
            self.transform = None

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image: Image.Image
        if self.jpegs:
            image = Image.open(io.BytesIO(self.jpegs[index % len(self.jpegs)]))
            if self.transform is None:  # gpu-resize: decode at 1/8 scale, the device resizes
                image.draft("RGB", (32, 32))
                image = image.convert("RGB").resize((32, 32))
            image = image.convert("RGB")
        else:
            image = Image.fromarray(self.images[index])
        if self.transform is None:  # gpu-resize: ship the 32x32 uint8 image as it is
            return torch.from_numpy(np.asarray(image)).permute(2, 0, 1).contiguous(), self.labels[
                index
            ]
        return self.transform(image), self.labels[index]


def _jpeg(image: np.ndarray, side: int, rng: np.random.Generator) -> bytes:
    """The 32x32 image as a photo-like JPEG of ``side`` pixels (upscaled, with grain)."""
    big = np.asarray(
        Image.fromarray(image).resize((side, side), Image.Resampling.BILINEAR), dtype=np.int16
    )
    grain = rng.integers(-12, 12, size=big.shape)
    buffer = io.BytesIO()
    Image.fromarray((big + grain).clip(0, 255).astype(np.uint8)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def small_cnn(classes: int) -> torch.nn.Module:
    """The CPU configuration's model: three conv blocks, ~1 ms a 32-pixel image on one core."""
    layers: list[torch.nn.Module] = []
    for width_in, width in ((3, 16), (16, 32), (32, 64)):
        layers += [torch.nn.Conv2d(width_in, width, 3, padding=1), torch.nn.BatchNorm2d(width)]
        layers += [torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
    return torch.nn.Sequential(
        *layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, classes)
    )


def make_loader(config: Config, dataset: FakeCifar) -> DataLoader:
    return DataLoader(
        dataset,
        batch_size=config.batch_size,
        shuffle=True,
        num_workers=config.workers,
        pin_memory=config.pin_memory and config.device.startswith("cuda"),
        persistent_workers=config.workers > 0,
        drop_last=True,  # a ragged last batch would recompile a compiled model
    )


def to_model_input(images: torch.Tensor, config: Config) -> torch.Tensor:
    """Copy to the device and finish on the GPU what the CPU did not do."""
    images = images.to(config.device, non_blocking=config.pin_memory)
    if config.input == "gpu-resize":
        images = F.interpolate(images.float(), size=config.image_size, mode="bilinear")
        images = (images / 255.0 - 0.5) / 0.5
    elif config.input == "uint8":
        images = (images.float() / 255.0 - 0.5) / 0.5
    if config.channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    return images


def sync_heavy_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The article's trap: ops whose output size depends on data make the CPU wait."""
    classes_present = torch.unique(labels)  # sync: output size depends on the data
    valid = labels >= 0
    logits, labels = logits[valid], labels[valid]  # sync: boolean-mask indexing
    keep = torch.nonzero(labels < 10).squeeze(1)  # sync: nonzero
    loss = F.cross_entropy(logits[keep], labels[keep])
    return loss + 0.0 * classes_present.numel()


class Trainer:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.dataset = FakeCifar(
            DATASET_IMAGES, config.input, config.image_size, jpeg_side=config.jpeg_side
        )
        self.loader = make_loader(config, self.dataset)
        self.loader_changed = False
        model = torchvision.models.resnet18(num_classes=10) if config.model == "resnet18" else None
        self.model = (model or small_cnn(10)).to(config.device)
        if config.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.001, momentum=0.9)
        self.scaler = torch.amp.GradScaler(enabled=config.precision == "fp16")
        self.new_scaler: torch.amp.GradScaler | None = None
        self.forward = torch.compile(self.model) if config.compile else self.model
        self.steps = 0

    # -- live knobs: each setter runs on the training thread, between two steps -----------

    def declare_knobs(self) -> None:
        """Offer every rung of the ladder as a knob, when running under gputop-train."""
        if hook is None:
            return
        c = self.config
        hook.knob(
            "num_workers",
            c.workers,
            self.set_workers,
            minimum=0,
            maximum=64,
            help="DataLoader worker processes (rung 1)",
            role="workers",
        )
        hook.knob(
            "pin_memory",
            c.pin_memory,
            self.set_pin_memory,
            help="page-locked batches + non_blocking copies (rung 2)",
            role="pin_memory",
        )
        hook.knob(
            "batch_size",
            c.batch_size,
            self.set_batch_size,
            minimum=1,
            maximum=8192,
            help="samples per step (rung 3: 512; with AMP 1024)",
            role="batch_size",
        )
        hook.knob(
            "input",
            c.input,
            self.set_input,
            choices=("float", "uint8", "gpu-resize"),
            help="what crosses PCIe: float32, uint8 (rung 4), 32px uint8 resized on GPU (rung 8)",
            role="input_format",
        )
        hook.knob(
            "precision",
            c.precision,
            self.set_precision,
            choices=("fp32", "fp16", "bf16"),
            help="autocast dtype; fp16 uses a GradScaler (rung 6)",
            role="precision",
        )
        hook.knob(
            "compile",
            c.compile,
            self.set_compile,
            help="torch.compile the model (rung 7)",
            role="compile",
        )
        hook.knob(
            "channels_last",
            c.channels_last,
            self.set_channels_last,
            help="NHWC memory format (rung 8)",
            role="channels_last",
        )
        hook.knob(
            "set_to_none",
            c.set_to_none,
            self.set_set_to_none,
            help="free gradients instead of zeroing them with memset kernels",
        )
        hook.knob(
            "sync_loss",
            c.sync_loss,
            self.set_sync_loss,
            help="a loss with nonzero/unique/boolean-mask host-device syncs",
            role="syncs",
        )

    def _rebuild_loader(self) -> None:
        self.loader = make_loader(self.config, self.dataset)
        self.loader_changed = True  # the running epoch stops; the next starts on the new loader

    def set_workers(self, value: int) -> None:
        self.config.workers = value
        self._rebuild_loader()

    def set_pin_memory(self, value: bool) -> None:
        self.config.pin_memory = value
        self._rebuild_loader()

    def set_batch_size(self, value: int) -> None:
        self.config.batch_size = value
        self._rebuild_loader()

    def set_input(self, value: str) -> None:
        self.config.input = value
        self.dataset.set_input(value, self.config.image_size)
        self._rebuild_loader()

    def set_precision(self, value: str) -> None:
        # This runs inside scaler.step(); update() still needs the old scaler this step.
        self.config.precision = value
        self.new_scaler = torch.amp.GradScaler(enabled=value == "fp16")

    def set_compile(self, value: bool) -> None:
        self.config.compile = value
        self.forward = torch.compile(self.model) if value else self.model

    def set_channels_last(self, value: bool) -> None:
        self.config.channels_last = value
        memory_format = torch.channels_last if value else torch.contiguous_format
        self.model = self.model.to(memory_format=memory_format)
        self.set_compile(self.config.compile)  # a compiled model recompiles for the new layout

    def set_set_to_none(self, value: bool) -> None:
        self.config.set_to_none = value

    def set_sync_loss(self, value: bool) -> None:
        self.config.sync_loss = value

    def recover(self, error: Exception) -> bool:
        """A step failed right after a live change (OOM, compile error): undo the change."""
        if hook is None:
            return False
        self.optimizer.zero_grad(set_to_none=True)
        if self.config.device.startswith("cuda"):
            torch.cuda.empty_cache()
        return hook.revert_last_change(f"{type(error).__name__}: {str(error)[:200]}")

    def autocast(self) -> Any:
        if self.config.precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.float16 if self.config.precision == "fp16" else torch.bfloat16
        return torch.autocast(device_type=self.config.device.split(":")[0], dtype=dtype)

    def train_step(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.new_scaler is not None:
            self.scaler, self.new_scaler = self.new_scaler, None
        images = to_model_input(images, self.config)
        labels = labels.to(self.config.device, non_blocking=self.config.pin_memory)
        with self.autocast():
            logits = self.forward(images)
            if self.config.sync_loss:
                loss = sync_heavy_loss(logits.float(), labels)
            else:
                loss = F.cross_entropy(logits, labels)
        self.optimizer.zero_grad(set_to_none=self.config.set_to_none)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.steps += 1
        return loss

    def run(self, max_steps: int, epochs: int) -> None:
        last_log = time.monotonic()
        epoch = 0
        # Under gputop-train --autopilot the demo trains on until the autopilot is done: its
        # own epochs end long before (143 s on the H100, mid-trial).
        while epoch < epochs or (hook is not None and hook.autopilot_active()):
            self.loader_changed = False
            for images, labels in self.loader:
                try:
                    loss = self.train_step(images, labels)
                except Exception as error:
                    if not self.recover(error):
                        raise
                    print(f"step failed, last change reverted: {error!r}"[:300], flush=True)
                    break
                if time.monotonic() - last_log >= LOG_EVERY_S:
                    last_log = time.monotonic()
                    print(f"epoch {epoch} step {self.steps} loss {loss.item():.3f}", flush=True)
                if max_steps and self.steps >= max_steps:
                    return
                if self.loader_changed:
                    break
            else:
                epoch += 1


def parse_args(argv: list[str]) -> tuple[Config, int, int]:
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if cuda else "cpu")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader workers (rung 1: 8)")
    parser.add_argument(
        "--pin-memory", action="store_true", help="pinned memory + non_blocking copies (rung 2)"
    )
    parser.add_argument("--batch-size", type=int, default=32 if cuda else 8, help="rung 3: 512")
    parser.add_argument(
        "--input",
        choices=("float", "uint8", "gpu-resize"),
        default="float",
        help="what crosses PCIe: float32 224px (rung 0), uint8 224px (rung 4), "
        "uint8 32px resized on the GPU (rung 8)",
    )
    parser.add_argument(
        "--precision",
        choices=("fp32", "fp16", "bf16"),
        default="fp32",
        help="autocast dtype; fp16 uses a GradScaler (rung 6)",
    )
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (rung 7)")
    parser.add_argument("--channels-last", action="store_true", help="NHWC memory format")
    parser.add_argument(
        "--no-set-to-none",
        dest="set_to_none",
        action="store_false",
        help="zero gradients with memset kernels instead of freeing them",
    )
    parser.add_argument(
        "--sync-loss",
        action="store_true",
        help="a loss with nonzero/unique/boolean-mask ops that force host-device syncs",
    )
    parser.add_argument(
        "--image-size",
        type=int,
        default=224 if cuda else 32,
        help="side of the resized image (224, as in the article; 32 on the CPU)",
    )
    parser.add_argument(
        "--model",
        choices=("resnet18", "small"),
        default="resnet18" if cuda else "small",
        help="ResNet-18 (the article's), or a small CNN (the CPU configuration)",
    )
    parser.add_argument(
        "--jpeg-side",
        type=int,
        default=0 if cuda else 320,
        help="store the images as JPEGs of this side, decoded per item (the CPU "
        "configuration: 320, 1.4 ms an image beside 1.1 ms of training per image on the "
        "2-core dev box, 2026-11-25, so one worker can pay up to 1.8x; at 512, 2.7 ms, it paid "
        "1.2-1.3x); "
        "0 keeps the article's raw 32x32 arrays",
    )
    parser.add_argument(
        "--steps", type=int, default=0, help="stop after N optimizer steps (0: run the epochs)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0 if cuda else 1,
        help="torch's intra-op threads (0: torch's default). The CPU configuration keeps one, "
        "as a GPU run's main process leaves the other cores to the DataLoader's workers: with "
        "two threads on a 2-core box beside one busy process, a step took 222 ms against 10 ms",
    )
    parser.add_argument("--epochs", type=int, default=50)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    config = Config(
        device=args.device,
        workers=args.workers,
        pin_memory=args.pin_memory,
        batch_size=args.batch_size,
        input=args.input,
        precision=args.precision,
        compile=args.compile,
        channels_last=args.channels_last,
        set_to_none=args.set_to_none,
        sync_loss=args.sync_loss,
        image_size=args.image_size,
        model=args.model,
        jpeg_side=args.jpeg_side,
    )
    return config, args.steps, args.epochs


def main(argv: list[str] | None = None) -> int:
    config, steps, epochs = parse_args(sys.argv[1:] if argv is None else argv)
    print(f"resnet demo: {config}", flush=True)
    trainer = Trainer(config)
    trainer.declare_knobs()
    try:
        trainer.run(steps, epochs)
    except KeyboardInterrupt:
        print(f"interrupted after {trainer.steps} steps", flush=True)
        return 130
    print(f"done: {trainer.steps} steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
