"""``vllm:<model>``: an in-process vLLM engine on the GPU(s).

The engine (``vllm.LLM(model, tensor_parallel_size, gpu_memory_utilization, max_model_len,
seed)``) starts on the first batch with a cache miss, so a warm re-run never takes the GPU.
A batch goes to ``LLM.chat`` as a list of conversations with one ``SamplingParams`` per
request (max_tokens, temperature, seed, constraint), so vLLM schedules all of it with
continuous batching. The misses are sent ``batch_size`` at a time (``--judge-batch-size``,
default 1024): that many is enough for the scheduler to keep the GPU full, and each
finished chunk is written to the cache, so a killed run loses at most one chunk.

Constraints use vLLM's structured outputs: ``SamplingParams(structured_outputs=
StructuredOutputsParams(json=... | regex=... | choice=...))`` (vLLM >= 0.10.2), or on older
vLLM ``SamplingParams(guided_decoding=GuidedDecodingParams(...))``. If the installed vLLM has
neither, a constrained request raises instead of being sent unconstrained.

vLLM is an optional dependency (``pip install 'lm-eval-fin[vllm]'``); without it, the first
batch raises a clear error.
"""

from __future__ import annotations

from typing import Any, Sequence

from lm_eval_fin.judge.base import JudgeRequest, JudgeResponse
from lm_eval_fin.judge.options import JudgeOptions
from lm_eval_fin.judge.spec import JudgeSpec

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

    def run(self, requests: Sequence[JudgeRequest], sink) -> None:
        # every SamplingParams first: an unsupported constraint fails before an engine starts
        params = [self.sampling_params(request) for request in requests]
        if self.llm is None:
            self._load()
        for start in range(0, len(requests), self.batch_size):
            chunk = range(start, min(start + self.batch_size, len(requests)))
            outputs = self.llm.chat(
                [list(requests[i].messages) for i in chunk],
                sampling_params=[params[i] for i in chunk],
                use_tqdm=False,
            )
            finished = []
            for index, output in zip(chunk, outputs):
                completion = output.outputs[0]
                finished.append((index, JudgeResponse(
                    completion.text,
                    prompt_tokens=len(output.prompt_token_ids or ()),
                    completion_tokens=len(completion.token_ids),
                )))
            sink.done_many(finished)

    def close(self) -> None:
        self.llm = None
