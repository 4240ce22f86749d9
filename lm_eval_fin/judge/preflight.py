"""Can the judge a command names do its work here? Asked before any work starts.

A run that generates for hours and then finds its judge misnamed loses nothing (the samples
are logged), but the user learns late. This check is cheap: an openai-compatible server is
asked for its models once; an hf or vllm model must be a folder, in the local Hugging Face
cache, or reachable on the hub; vllm must be importable. A server that does not answer is a
problem too: start it first, or run without ``--judge`` and re-score with ``lm-eval-fin score``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import urllib.error
import urllib.request

from lm_eval_fin import hub
from lm_eval_fin.cleantext import one_line
from lm_eval_fin.judge.spec import JudgeSpec

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


def judge_problem(spec: JudgeSpec) -> str | None:
    """Why the judge ``spec`` cannot work here, in one line that names the fix; None if it can."""
    if spec.backend == "openai":
        try:
            served = served_models(spec.base_url, os.environ.get("OPENAI_API_KEY"))
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                return f"judge {spec}: the server refused the API key (HTTP {exc.code}); set OPENAI_API_KEY"
            return None  # a server without a model list: the first request will tell
        except (OSError, ValueError) as exc:
            return (
                f"judge {spec}: no answer from {spec.base_url} ({one_line(exc, 160)}); start the server first, "
                "or run without --judge and re-score later with `lm-eval-fin score`"
            )
        if served and spec.model not in served:
            return f"judge {spec}: the server has no model {spec.model!r}; it serves {', '.join(served[:10])}"
        return None
    if spec.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        return (
            f"judge {spec}: vLLM is not installed (GPU: pip install 'lm-eval-fin[vllm]'; CPU: make install-vllm)"
        )
    problem = hub.model_problem(spec.model)
    return None if problem is None else f"judge {spec}: {problem}"
