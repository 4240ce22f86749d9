"""lm-eval's own vLLM engine and a ``vllm:`` judge in one process: one engine in memory at a time.

A judged task in an lm-eval run whose model under test is ``--model vllm`` starts its judge
engine once generation is over (judged metrics run after all responses are in). Before a
judge engine starts, the judge layer calls the hooks registered with
:func:`lm_eval_fin.judge.vllm_backend.before_engine_start`; importing this module (the
harness package does) registers :func:`park_model_engines`, which shuts down the engine of
the model being evaluated and leaves a :class:`ParkedEngine` in its place.

Finding that model. lm-eval keeps no registry of live models, and cannot be asked for one
when our code loads: it builds the model before it imports a task's code, so recording
instances from then on would miss it. It does hand the model to ``lm_eval.evaluator.evaluate
(lm, ...)``, and a judged metric runs inside that call, so the model is a local of a frame
above the hook: :func:`models_being_evaluated` walks up the stack to that frame and reads its
``lm``, unwrapping lm-eval's ``CachingLM`` (``--use_cache``: ``.lm``) and our ``fin-refine``
(``.base``). That is exact and cheap (no heap scan), and the same under bare ``lm_eval
--include_path`` and ``lm-eval-fin run``. A judge started outside an evaluation (``lm-eval-fin
score`` and ``rerank``, a Python caller still holding a model after ``simple_evaluate``
returned) finds nothing to park: such a caller frees its own engine.
"""

from __future__ import annotations

import gc
import logging
import sys
from types import FrameType, SimpleNamespace
from typing import Any

from lm_eval_fin.judge import vllm_backend

logger = logging.getLogger("lm_eval_fin.harness")

# attributes through which an lm-eval model wraps another: CachingLM.lm, fin-refine's base
_WRAPPED = ("lm", "base")


class ParkedEngine:
    """Stands in for the ``vllm.LLM`` of an lm-eval ``--model vllm`` model whose engine was
    shut down to make room for a judge's. It keeps only the engine's model config (lm-eval
    reads ``llm_engine.model_config`` for ``max_length``), so the engine itself, weights and KV
    cache, is freed; any other use builds the engine again from the model's ``model_args``,
    releasing the judge's first."""

    def __init__(self, llm: Any, model_args: dict):
        self._model_config = getattr(getattr(llm, "llm_engine", None), "model_config", None)
        self._model_args = model_args
        self._live: Any = None  # the rebuilt vllm.LLM, while there is one

    @property
    def model_config(self) -> Any:
        return self._live.model_config if self._live is not None else self._model_config

    @property
    def llm_engine(self) -> Any:
        return self._live.llm_engine if self._live is not None else SimpleNamespace(model_config=self._model_config)

    def park(self) -> bool:
        """Shut the rebuilt engine down again; True if there was one."""
        live, self._live = self._live, None
        if live is None:
            return False
        vllm_backend.shutdown_engine(live)
        return True

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._live is None:
            vllm_backend.release_engine()
            logger.info("vLLM: starting the engine of the model under test again")
            self._live = vllm_backend.new_engine(**self._model_args)
        return getattr(self._live, name)


def _evaluate_frames(frame: FrameType | None):
    while frame is not None:
        if frame.f_code.co_name == "evaluate" and frame.f_globals.get("__name__") == "lm_eval.evaluator":
            yield frame
        frame = frame.f_back


def models_being_evaluated(frame: FrameType | None = None) -> list[Any]:
    """lm-eval's ``VLLM`` models of the evaluations in progress on this thread's stack (from
    ``frame`` up; default: the caller's), wrappers unwrapped."""
    harness = sys.modules.get("lm_eval.models.vllm_causallms")
    if harness is None:
        return []  # no --model vllm was loaded in this process
    found: list[Any] = []
    pending = [f.f_locals.get("lm") for f in _evaluate_frames(frame or sys._getframe(1))]
    while pending:
        model = pending.pop()
        if model is None or any(model is seen for seen in found):
            continue
        if isinstance(model, harness.VLLM):
            found.append(model)
        # vars(): a wrapper's attributes as stored, no property or __getattr__ runs
        state = vars(model) if hasattr(model, "__dict__") else {}
        pending += [state.get(name) for name in _WRAPPED]
    return found


def park_model_engines() -> int:
    """Shut down the engine of every lm-eval ``--model vllm`` model being evaluated (their
    generation is over when a judge engine is needed); the number shut down."""
    parked = 0
    for model in models_being_evaluated(sys._getframe(1)):
        engine = vars(model).get("model")  # absent with data_parallel_size > 1 (Ray workers)
        if isinstance(engine, ParkedEngine):
            parked += engine.park()
        elif engine is not None:
            vllm_backend.shutdown_engine(engine)
            model.model = ParkedEngine(engine, dict(model.model_args))
            parked += 1
        del engine
    if parked:
        # an engine freezes the heap at its start (gc.freeze), which keeps the cycles of that
        # time from being collected; unfrozen, the engine's memory is freed now
        gc.unfreeze()
        gc.collect()
        logger.info(
            "vLLM judge: shut down the engine of the model under test (lm-eval --model vllm; its generation "
            "is over) so that one engine is in memory at a time"
        )
    return parked


vllm_backend.before_engine_start(park_model_engines)
