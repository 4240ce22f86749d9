"""Can the judge a command names do its work here? Asked before any work starts.

A run that generates for hours and then finds its judge misnamed loses nothing (the samples
are logged), but the user learns late. This check is cheap, and each backend says what it
means for it (:class:`~lm_eval_fin.judge.spec.BackendKind`, ``problem``): an
openai-compatible server is asked for its models once; an hf or vllm model must be a folder,
in the local Hugging Face cache, or reachable on the hub; vllm must be importable. A server
that does not answer is a problem too: start it first, or run without ``--judge`` and
re-score with ``lm-eval-fin score``.
"""

from __future__ import annotations

import json
import urllib.request

from lm_eval_fin import hub
from lm_eval_fin.judge.spec import JudgeSpec, backend_kind

MODELS_TIMEOUT_S = 5.0


def served_models(base_url: str, api_key: str | None = None) -> list[str]:
    """The model ids an openai-compatible server lists at ``GET /models`` (OSError or
    ValueError when it does not answer sensibly)."""
    request = urllib.request.Request(f"{base_url.rstrip('/')}/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(request, timeout=MODELS_TIMEOUT_S) as answer:  # noqa: S310 - the user's URL
        listed = json.loads(answer.read()).get("data", [])
    return [str(model.get("id")) for model in listed if isinstance(model, dict)]


def model_problem(spec: JudgeSpec) -> str | None:
    """A local or hub model (hf, vllm): why it cannot be found, or None."""
    problem = hub.model_problem(spec.model)
    return None if problem is None else f"judge {spec}: {problem}"


def judge_problem(spec: JudgeSpec) -> str | None:
    """Why the judge ``spec`` cannot work here, in one line that names the fix; None if it can."""
    return backend_kind(spec.backend).problem(spec)
