"""Where a thread's samples go, from py-spy's collapsed stacks (``tui_cost.py --profile``).

Prints, per thread (or the one named), the share of samples in each function inclusive of
what it calls, and the share spent in the function itself: the two views a flame graph
gives, as text that fits in a results file.

    python -m benchmarks.diagnosis.stack_summary stacks/tui-1.txt --thread MainThread --top 40
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

# py-spy's raw frame: "function (path/to/file.py:LINE)"; the file's name is enough here.
_FRAME = re.compile(r"^(?P<name>.*) \((?P<path>[^()]*?)(?::\d+)?\)$")


def frame_name(frame: str) -> str:
    match = _FRAME.match(frame)
    if match is None:
        return frame
    return f"{match['name']} ({match['path'].rsplit('/', 1)[-1]})"


def summarise(
    lines: list[str], thread: str | None
) -> dict[str, tuple[int, collections.Counter[str], collections.Counter[str]]]:
    """Per thread name: samples, inclusive and self counts per function."""
    found: dict[str, tuple[int, collections.Counter[str], collections.Counter[str]]] = {}
    for line in lines:
        stack, _, count_text = line.rstrip().rpartition(" ")
        frames = stack.split(";")
        if len(frames) < 2 or not count_text.isdigit():
            continue
        name = frames[0].split(": ", 1)[-1].strip()  # "thread (123): MainThread"
        if thread is not None and name != thread:
            continue
        count = int(count_text)
        total, inclusive, own = found.get(name, (0, collections.Counter(), collections.Counter()))
        functions = [frame_name(frame) for frame in frames[1:]]
        for function in set(functions):
            inclusive[function] += count
        own[functions[-1]] += count
        found[name] = (total + count, inclusive, own)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stacks", type=Path)
    parser.add_argument("--thread", help="only this thread (py-spy's name: MainThread, ...)")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    found = summarise(args.stacks.read_text().splitlines(), args.thread)
    for name, (total, inclusive, own) in sorted(found.items(), key=lambda item: -item[1][0]):
        print(f"== {name}: {total} samples")
        for title, counter in (("inclusive", inclusive), ("self", own)):
            print(f"-- {title}")
            for function, count in counter.most_common(args.top):
                print(f"{100.0 * count / total:5.1f}%  {function}")


if __name__ == "__main__":
    main()
