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


def main() -> None:
    args = parser.parse_args()
    model = models.__dict__[args.arch]().cuda()
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    criterion = nn.CrossEntropyLoss().cuda()
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
        pin_memory=True,
    )
    started = time.time()
    for epoch in range(args.epochs):
        model.train()
        end = time.time()
        for i, (images, target) in enumerate(train_loader):
            images = images.cuda(non_blocking=True)
            target = target.cuda(non_blocking=True)
            if args.channels_last:
                images = images.contiguous(memory_format=torch.channels_last)
            with torch.autocast("cuda", torch.bfloat16, enabled=args.amp == "bf16"):
                output = train_model(images)
                loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if i % args.print_freq == 0:
                print(f"Epoch: [{epoch}][{i}] Time {time.time() - end:.3f} Loss {loss.item():.4f}")
            end = time.time()
            if args.max_seconds and time.time() - started > args.max_seconds:
                return


if __name__ == "__main__":
    main()
