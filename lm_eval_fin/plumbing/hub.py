"""Whether a model or dataset the user names can be loaded here, asked once and before any work.

A Hugging Face hub id that is not in the local cache needs the hub; on a machine without it,
transformers retries for about a minute before it fails. Asking first turns that into one line
at the start of a run (the settings check) or a fast NaN with a warning at scoring time.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

HUB_ADDRESS = ("huggingface.co", 443)
_TRUE = {"1", "true", "yes", "on"}


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` is set: the user said there is no hub."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


@functools.lru_cache(maxsize=1)
def hub_unreachable(timeout_s: float = 3.0) -> str | None:
    """Why the hub cannot be reached (the connection error's name), or None when one TCP
    connection to it succeeds; asked once per process. Not asked when offline is set."""
    if hub_offline():
        return "HF_HUB_OFFLINE is set"
    try:
        socket.create_connection(HUB_ADDRESS, timeout=timeout_s).close()
    except OSError as exc:
        return type(exc).__name__
    return None


def hub_reachable() -> bool:
    return hub_unreachable() is None


def _is_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or Path(name).expanduser().exists()


def cached(repo_id: str) -> bool:
    """``repo_id``'s config is in the local Hugging Face cache."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers brings it
        return False
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - an id the hub library rejects is not in its cache
        return False
    return isinstance(found, str)


def model_problem(name: str) -> str | None:
    """Why the model ``name`` (a folder or a hub id) cannot be loaded here, or None when it can
    (a folder that exists, a hub id in the local cache, or a reachable hub).

    >>> model_problem("./no/such/folder")
    "no model folder './no/such/folder'"
    """
    if _is_path(name):
        return None if Path(name).expanduser().is_dir() else f"no model folder {name!r}"
    if cached(name) or hub_reachable():
        return None
    why = "HF_HUB_OFFLINE is set" if hub_offline() else "the Hugging Face hub cannot be reached"
    return f"the model {name!r} is not in the local Hugging Face cache and {why}"


def datasets_offline() -> bool:
    """``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` is set: ``datasets`` reads its cache only."""
    return hub_offline() or os.environ.get("HF_DATASETS_OFFLINE", "").strip().lower() in _TRUE


def _squashed(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def dataset_cached(repo_id: str) -> bool:
    """Some copy of the hub dataset ``repo_id`` is in the local caches: ``datasets``' own
    (``<namespace>___<snake_case name>``, what it loads offline) or the hub's download cache.
    Lenient on purpose (names compared without case or underscores): a false "cached" costs
    what it cost before this check, a false "missing" would stop a run that works."""
    from huggingface_hub import constants

    home = Path(os.environ.get("HF_HOME") or constants.HF_HOME).expanduser()  # read now: a test may move it
    datasets_cache = Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets").expanduser()
    hub_cache = Path(os.environ.get("HF_HUB_CACHE") or home / "hub").expanduser()
    namespace, _, name = repo_id.rpartition("/")
    wanted = _squashed(f"{namespace}___{name}" if namespace else name)
    try:
        if any(_squashed(entry.name) == wanted and entry.is_dir() for entry in datasets_cache.iterdir()):
            return True
    except OSError:
        pass
    return (hub_cache / f"datasets--{repo_id.replace('/', '--')}").is_dir()


def dataset_problem(repo_id: str) -> str | None:
    """Why the hub dataset ``repo_id`` cannot be loaded here (not cached, and the hub off or
    unreachable), or None when it can."""
    if dataset_cached(repo_id):
        return None
    if datasets_offline():
        return f"the dataset {repo_id!r} is not in the local Hugging Face cache and offline mode is set"
    if hub_reachable():
        return None
    return f"the dataset {repo_id!r} is not in the local Hugging Face cache and the Hugging Face hub cannot be reached"
