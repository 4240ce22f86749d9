"""``vllm:<model>``: an in-process vLLM engine on the GPU(s).

The engine (``vllm.LLM(model, tensor_parallel_size, gpu_memory_utilization, max_model_len,
seed)``) starts on the first batch with a cache miss, so a warm re-run never takes the GPU.
A batch goes to ``LLM.chat`` as a list of conversations with one ``SamplingParams`` per
request (max_tokens, temperature, seed, constraint), so vLLM schedules all of it with
continuous batching. The misses are sent ``batch_size`` at a time (``--judge-batch-size``,
default 1024): that many is enough for the scheduler to keep the GPU full, and each
finished chunk is written to the cache, so a killed run loses at most one chunk.

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

vLLM is an optional dependency (``pip install 'lm-eval-fin[vllm]'``); without it, the first
batch raises a clear error.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from lm_eval_fin.judge.base import JudgeRequest, JudgeResponse
from lm_eval_fin.judge.options import JudgeOptions
from lm_eval_fin.judge.spec import JudgeSpec

logger = logging.getLogger("lm_eval_fin.judge")

DEFAULT_BATCH_SIZE = 1024


def _import_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise RuntimeError(
            "the vllm judge backend needs vLLM on a CUDA machine: pip install 'lm-eval-fin[vllm]' "
            "(or serve the model with `vllm serve` and use an openai:<url>#<model> judge)"
        ) from exc
    return vllm


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


class VLLMBackend:
    def __init__(self, spec: JudgeSpec, options: JudgeOptions):
        self.spec = spec
        self.options = options
        self.batch_size = options.batch_size or DEFAULT_BATCH_SIZE
        self.llm = None

    def _load(self) -> None:
        vllm = _import_vllm()
        kwargs: dict[str, Any] = {
            "model": self.spec.model,
            "tensor_parallel_size": self.options.tensor_parallel_size,
            "gpu_memory_utilization": self.options.gpu_memory_utilization,
            "seed": self.options.seed,
        }
        if self.options.max_model_len:
            kwargs["max_model_len"] = self.options.max_model_len
        self.llm = vllm.LLM(**kwargs)

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
        config = getattr(self.llm, "model_config", None) or getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
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
                    "leaves no room for an answer (raise --judge-max-model-len or shorten the prompt); not sent",
                )
        return failed

    def _chat(self, requests: Sequence[JudgeRequest], params: list, indices: Sequence[int]) -> list[tuple[int, JudgeResponse]]:
        outputs = self.llm.chat(
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
        if self.llm is None:
            self._load()
        failed = self.too_long(requests)
        if failed:
            sink.done_many(sorted(failed.items()))
        pending = [index for index in range(len(requests)) if index not in failed]
        for start in range(0, len(pending), self.batch_size):
            chunk = pending[start : start + self.batch_size]
            try:
                finished = self._chat(requests, params, chunk)
            except Exception as exc:  # noqa: BLE001 - one bad request must not fail its chunk
                logger.warning("vLLM judge: a chunk of %d requests raised (%s: %s); sending them one by one",
                               len(chunk), type(exc).__name__, exc)
                finished = []
                for index in chunk:
                    try:
                        finished += self._chat(requests, params, [index])
                    except Exception as error:  # noqa: BLE001 - this request alone fails
                        finished.append((index, JudgeResponse(None, error=f"vLLM: {type(error).__name__}: {error}")))
            sink.done_many(finished)

    def close(self) -> None:
        self.llm = None
