"""An ImageNet training loop the way pytorch/examples/imagenet/main.py writes it, with its
``--dummy`` data (torchvision FakeData: random images through ToTensor), 4 workers by default.
It declares no gputop-train knob. The flags are the fixes a user would try by hand.

    python imagenet_style.py                       # resnet18, batch 256, 4 workers, fp32
    python imagenet_style.py -j 16                 # a fix in its own flags
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn as nn
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as transforms

parser = argparse.ArgumentParser(description="PyTorch ImageNet Training (dummy data)")
parser.add_argument("-a", "--arch", default="resnet18")
parser.add_argument("-j", "--workers", default=4, type=int)
parser.add_argument("--epochs", default=90, type=int)
parser.add_argument("-b", "--batch-size", default=256, type=int)
parser.add_argument("--lr", default=0.1, type=float)
parser.add_argument("--momentum", default=0.9, type=float)
parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
parser.add_argument("-p", "--print-freq", default=100, type=int)
parser.add_argument("--amp", choices=("fp32", "bf16"), default="fp32")
parser.add_argument("--channels-last", action="store_true")
parser.add_argument("--compile", action="store_true")
parser.add_argument("--max-seconds", type=float, default=0.0, help="stop after this long")
parser.add_argument("--meter-s", type=float, default=5.0, help="print samples/s this often")


def main() -> None:
    args = parser.parse_args()
    # The GPU as the example has it; the CPU only for a smoke test of the harness.
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = models.__dict__[args.arch]().to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(
        model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay
    )
    train_model = torch.compile(model) if args.compile else model
    train_dataset = datasets.FakeData(1281167, (3, 224, 224), 1000, transforms.ToTensor())
    train_loader = torch.utils.data.DataLoader(
        train_dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=device.type == "cuda",
    )
    started = time.time()
    meter_start, meter_samples = time.time(), 0
    for epoch in range(args.epochs):
        model.train()
        end = time.time()
        for i, (images, target) in enumerate(train_loader):
            images = images.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            if args.channels_last:
                images = images.contiguous(memory_format=torch.channels_last)
            with torch.autocast(device.type, torch.bfloat16, enabled=args.amp == "bf16"):
                output = train_model(images)
                loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if i % args.print_freq == 0:
                print(f"Epoch: [{epoch}][{i}] Time {time.time() - end:.3f} Loss {loss.item():.4f}")
            end = time.time()
            meter_samples += images.size(0)
            if args.meter_s and end - meter_start >= args.meter_s:
                # The script's own meter (autopilot/autopilot_settled.py reads it): samples/s
                # over the last interval, with the wall time it ended at.
                rate = meter_samples / (end - meter_start)
                print(f"meter t={end:.1f} {rate:.1f} samples/s", flush=True)
                meter_start, meter_samples = end, 0
            if args.max_seconds and time.time() - started > args.max_seconds:
                return


if __name__ == "__main__":
    main()
