"""LLM judges (an LLM that is not the model under test) behind one batched, cached interface.

    from lm_eval_fin.judge import load_judge, JudgeRequest, complete_parsed

    judge = load_judge("openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct")
    scores = complete_parsed(judge, [JudgeRequest(messages=(...,)) for ...], parse=my_parser)

Modules: :mod:`~lm_eval_fin.judge.spec` (naming a judge), :mod:`~lm_eval_fin.judge.options`
(decoding and serving options), :mod:`~lm_eval_fin.judge.core` (batching, resolution of
decoding parameters, stats, ``complete_parsed``), :mod:`~lm_eval_fin.judge.cache` (the
sqlite cache and its key), and one module per backend: ``vllm_backend``,
``openai_backend`` (with :mod:`~lm_eval_fin.judge.endpoints`), ``hf_backend``. Each backend
module registers its spec kind when imported (:func:`~lm_eval_fin.judge.spec.register_backend`);
they are imported here, so every kind is known wherever the package is used.
"""

from lm_eval_fin.judge.base import (
    BatchStats,
    Judge,
    JudgeConfigError,
    JudgeRequest,
    JudgeResponse,
    RequestUsage,
    chat_request,
    failure_phrase,
    prompt_hash,
)
from lm_eval_fin.judge.cache import JudgeCacheError
from lm_eval_fin.judge.core import ParsedAnswer, complete_parsed, complete_parsed_answers, load_judge
from lm_eval_fin.judge.options import JudgeOptions
from lm_eval_fin.judge.spec import JudgeSpecError, parse_spec
from lm_eval_fin.text.cleantext import printable

# each backend registers its spec kind; this order is the order of the forms in messages
from lm_eval_fin.judge import vllm_backend, openai_backend, hf_backend  # noqa: E402, F401, I001 isort: skip

__all__ = [
    "BatchStats",
    "Judge",
    "JudgeCacheError",
    "JudgeConfigError",
    "JudgeOptions",
    "JudgeRequest",
    "JudgeResponse",
    "JudgeSpecError",
    "ParsedAnswer",
    "RequestUsage",
    "complete_parsed",
    "chat_request",
    "complete_parsed_answers",
    "failure_phrase",
    "load_judge",
    "parse_spec",
    "printable",
    "prompt_hash",
]
