"""The suite's two lanes: the tests that start no process (``-m fast``) and the rest.

Why: most of the suite's time is real jobs (torchrun ranks, monitors launched through the CLI),
while about a third of its tests start no process and pass in well under a minute; a
developer runs those alone while working and CI runs them first.

Which lane a test is in is read from its source, so a new test module needs no marker: a test
starts a process when its function, a fixture it asks for or a helper it calls refers, at any
depth through this checkout's modules (``tests``, ``benchmarks``, ``gputop_train``), to
something that starts one (``subprocess``, ``pty``, ``multiprocessing``, ``os.fork``...). The
reading errs towards the process lane (a class that starts a process in one method counts
whole), and what it cannot see (a product function handed in at run time) the run itself
catches: every process started while a ``fast`` test runs is noted (:func:`note_started`,
wired into ``os`` and ``_posixsubprocess`` by :func:`watch_process_starts`) and fails it,
naming what started; mark such a test ``@pytest.mark.process``.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock

from .paths import REPO

# What starts a process, by module: None means any use of the module does.
_STARTERS: dict[str, frozenset[str] | None] = {
    "subprocess": None,
    "pty": None,
    "multiprocessing": None,
    "_posixsubprocess": None,
    "os": frozenset(
        {"fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp"}
        | {f"exec{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")}
        | {f"spawn{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")}
    ),
    "concurrent.futures": frozenset({"ProcessPoolExecutor"}),
    "asyncio": frozenset({"create_subprocess_exec", "create_subprocess_shell"}),
}
_OURS = ("tests", "gputop_train", "benchmarks")


def _module_file(name: str) -> Path | None:
    """This checkout's source file for module ``name``, or None for anything else."""
    if name.split(".")[0] not in _OURS:
        return None
    base = REPO.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _absolute(module: str | None, level: int, package: str) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join(parts + ([module] if module else []))


class _Module:
    """One module's top-level names and, for each, what it refers to."""

    def __init__(self, name: str, path: Path) -> None:
        tree = ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        self.imports: dict[str, tuple[str, str | None]] = {}  # local -> (module, attribute)
        definitions: dict[str, ast.AST] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = (alias.name, None)
                    else:
                        top = alias.name.split(".")[0]
                        self.imports[top] = (top, None)
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(node.module, node.level, package)
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (source, alias.name)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                definitions[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        definitions[target.id] = node
        # What each top-level name reads, walked once (the reading below goes over it until
        # nothing changes: walking the trees each time cost each test process 3.4 s of CPU).
        self.references: dict[str, frozenset[tuple[str, str | None]]] = {
            name: frozenset(_references(node)) for name, node in definitions.items()
        }


def _references(node: ast.AST) -> Iterator[tuple[str, str | None]]:
    """(name, attribute read from it) for each name ``node`` reads."""
    for child in ast.walk(node):
        if isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name):
            yield child.value.id, child.attr
        elif isinstance(child, ast.Name):
            yield child.id, None
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from ((arg.arg, None) for arg in child.args.args)  # fixtures it asks for


@functools.cache
def _module(name: str) -> _Module | None:
    path = _module_file(name)
    return _Module(name, path) if path else None


_in_progress: set[str] = set()


@functools.cache
def starting_names(module_name: str) -> frozenset[str]:
    """The top-level names of ``module_name`` (of this checkout) that start a process."""
    module = _module(module_name)
    if module is None or module_name in _in_progress:
        return frozenset()  # an import cycle: the run-time check covers what this misses
    _in_progress.add(module_name)
    try:
        starting: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, references in module.references.items():
                if name not in starting and _starts(module, references, starting):
                    starting.add(name)
                    changed = True
        return frozenset(starting)
    finally:
        _in_progress.discard(module_name)


def _starts(
    module: _Module, references: frozenset[tuple[str, str | None]], starting: set[str]
) -> bool:
    return any(
        name in starting or _reads_a_starter(module, name, attribute)
        for name, attribute in references
    )


def _reads_a_starter(module: _Module, name: str, attribute: str | None) -> bool:
    if name not in module.imports:
        return False
    source, imported = module.imports[name]
    if imported is None:  # `import x`: what is read from it
        return _is_starter_module(source, attribute)
    return _is_starter_module(source, imported) or (  # `from x import name`
        _is_starter_module(f"{source}.{imported}", attribute)  # `from package import module`
    )


def _is_starter_module(module: str, attribute: str | None) -> bool:
    if module in _STARTERS:
        names = _STARTERS[module]
        return names is None or attribute in names
    if attribute is None or _module_file(module) is None:
        return False
    return attribute in starting_names(module)


def starts_a_process(module_name: str, function: str, fixtures: tuple[str, ...]) -> bool:
    """Whether test ``function`` of ``module_name`` (a method: its class's name), asking for
    ``fixtures``, starts a process as its source reads."""
    if _module_file(module_name) is None:
        return True  # not a file of this checkout: the slow lane
    reading = _test_modules_read()
    starting = reading[module_name] if module_name in reading else starting_names(module_name)
    return function in starting or any(fixture in starting for fixture in fixtures)


_READINGS = Path(tempfile.gettempdir()) / f"gputop-train-test-lanes-{os.getuid()}"


def _sources_signature() -> str:
    """A digest of the path, size and time of every source file the reading follows."""
    digest = hashlib.sha256()
    for folder in _OURS:
        for path in sorted((REPO / folder).rglob("*.py")):
            stat = path.stat()
            digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:20]


@functools.cache
def _test_modules_read() -> dict[str, frozenset[str]]:
    """:func:`starting_names` of every test module, read once for these sources and kept in a
    file: each test process (three a lane, three lanes a run) read the whole tree itself, 2 s
    of CPU each on the 2-core dev box (2026-12-06)."""
    _READINGS.mkdir(mode=0o700, exist_ok=True)
    path = _READINGS / f"{_sources_signature()}.json"
    with FileLock(str(path.with_suffix(".lock"))):
        if path.exists():
            return {name: frozenset(names) for name, names in json.loads(path.read_text()).items()}
        modules = [f"tests.{test.stem}" for test in sorted((REPO / "tests").glob("test_*.py"))]
        reading = {module: starting_names(module) for module in modules}
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps({name: sorted(names) for name, names in reading.items()}))
        partial.replace(path)
        return reading


# -- the run-time check -------------------------------------------------------------------

_started: list[str] = []


def note_started(what: str) -> None:
    """Say that a process was started (the test helpers that ask a server to fork call it)."""
    _started.append(what)


def take_started() -> list[str]:
    """What was started since the last call."""
    taken = list(_started)
    _started.clear()
    return taken


# A library looking itself up, not a test starting a job: ctypes.util.find_library runs
# `/sbin/ldconfig -p`, and torch's first import in a process does so (torch.cuda ->
# cuda.pathfinder's find_library("dl")), so a fast test that is the first to import torch
# would fail alone and pass in the lane, where an earlier test imported it.
LIBRARY_LOOKUPS = ("/sbin/ldconfig -p",)


def _noting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def noted(*args: Any, **kwargs: Any) -> Any:
        command = _describe(args)
        if command not in LIBRARY_LOOKUPS:
            note_started(f"{name}({command})")
        return original(*args, **kwargs)

    return noted


def _describe(args: tuple[Any, ...]) -> str:
    for arg in args:  # the first argument that reads like a command line
        if isinstance(arg, (list, tuple)) and arg and isinstance(arg[0], (str, bytes)):
            return " ".join(a.decode() if isinstance(a, bytes) else str(a) for a in arg)[:200]
        if isinstance(arg, (str, bytes)):
            return arg.decode() if isinstance(arg, bytes) else arg
    return ""


def watch_process_starts() -> None:
    """Note every process this test process starts: ``subprocess`` (through its own binding)
    and ``multiprocessing`` go through ``_posixsubprocess.fork_exec``, the rest through
    ``os``."""
    import _posixsubprocess
    import subprocess

    fork_exec = _noting("subprocess", _posixsubprocess.fork_exec)
    _posixsubprocess.fork_exec = fork_exec
    if getattr(subprocess, "_fork_exec", None) is not None:
        subprocess._fork_exec = fork_exec  # type: ignore[attr-defined]
    for name in ("fork", "forkpty", "system", "posix_spawn", "posix_spawnp"):
        setattr(os, name, _noting(f"os.{name}", getattr(os, name)))
