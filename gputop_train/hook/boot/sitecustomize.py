"""Put on PYTHONPATH by the gputop-train launcher: arms the hook in every Python process.

It loads gputop_train from the monitor's own installation (``GPUTOP_TRAIN_PKG_ROOT``)
without adding that site-packages to ``sys.path``, so the job's own packages are never
shadowed; the hook needs nothing but the standard library and torch. It then chains to the
``sitecustomize`` it shadows (Ubuntu's Python ships one).
"""

import importlib
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain_to_shadowed_sitecustomize() -> None:
    ours = sys.modules.pop("sitecustomize", None)
    saved_path = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    try:
        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as error:
        if error.name != "sitecustomize":
            print(f"gputop-train: the shadowed sitecustomize failed: {error!r}", file=sys.stderr)
    except Exception as error:
        print(f"gputop-train: the shadowed sitecustomize failed: {error!r}", file=sys.stderr)
    finally:
        sys.path[:] = saved_path
        if ours is not None:
            sys.modules["sitecustomize"] = ours


def _load_package(root: str) -> None:
    if "gputop_train" in sys.modules:
        return
    package_dir = os.path.join(root, "gputop_train")
    spec = importlib.util.spec_from_file_location(
        "gputop_train",
        os.path.join(package_dir, "__init__.py"),
        submodule_search_locations=[package_dir],
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"no gputop_train package in {root}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gputop_train"] = module
    spec.loader.exec_module(module)


def _arm() -> None:
    # wire.HOOK_ENV and wire.PKG_ROOT_ENV, by value: the package is not importable yet.
    if os.environ.get("GPUTOP_TRAIN_HOOK") != "1":
        return
    try:
        _load_package(os.environ["GPUTOP_TRAIN_PKG_ROOT"])
        from gputop_train.hook import arm

        arm()
    except Exception as error:
        print(f"gputop-train hook not armed: {error!r}; training is not affected", file=sys.stderr)


_chain_to_shadowed_sitecustomize()
_arm()
