"""Can the judge a command names do its work here? Asked before any work starts.

A run that generates for hours and then finds its judge misnamed loses nothing (the samples
are logged), but the user learns late. This check is cheap: an openai-compatible server is
asked for its models once; an hf or vllm model must be a folder, in the local Hugging Face
cache, or reachable on the hub; vllm must be importable. A server that does not answer (an
unresolvable host, https to an http server) is a problem too, for every command: start it
first, or run without ``--judge`` and re-score with ``lm-eval-fin score``. The judge cache
must open and take writes (:func:`cache_problem`): a corrupt or read-only cache is known
before the model under test runs, not at its first answer.
"""

from __future__ import annotations

import importlib.util
import json
import os
import urllib.error
import urllib.request

from lm_eval_fin import hub
from lm_eval_fin.cleantext import one_line
from lm_eval_fin.exit_status import JUDGE_CACHE, Problem
from lm_eval_fin.judge.cache import JudgeCache, JudgeCacheError
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


def judge_problem(spec: JudgeSpec, score_later: bool = True) -> str | None:
    """Why the judge ``spec`` cannot work here, in one line that names the fix; None if it can.
    ``score_later``: the command can run without the judge and be scored later (``run``)."""
    if spec.backend == "openai":
        try:
            served = served_models(spec.base_url, os.environ.get("OPENAI_API_KEY"))
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                return f"judge {spec}: the server refused the API key (HTTP {exc.code}); set OPENAI_API_KEY"
            return None  # a server without a model list: the first request will tell
        except (OSError, ValueError) as exc:
            later = ", or run without --judge and re-score later with `lm-eval-fin score`" if score_later else ""
            return (
                f"judge {spec}: no answer from {spec.base_url} ({one_line(exc, 160)}); check the address "
                f"(http or https, host, port) and start the server first{later}"
            )
        if served and spec.model not in served:
            return f"judge {spec}: the server has no model {spec.model!r}; it serves {', '.join(served[:10])}"
        return None
    if spec.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        return (
            f"judge {spec}: vLLM is not installed (GPU: pip install 'lm-eval-fin[vllm]'; CPU: make install-vllm)"
        )
    problem = hub.model_problem(spec.model)
    return None if problem is None else f"judge {spec}: cannot load the model: {problem}"


def cache_problem(path: str | os.PathLike | None = None) -> str | None:
    """Why the judge cache (``path``, else the default one) cannot be used, in one line naming
    the file and the fix; None when it opens and takes writes (:meth:`JudgeCache.check`)."""
    cache = JudgeCache(path)
    try:
        cache.check()
    except JudgeCacheError as exc:
        return str(exc)
    finally:
        cache.close()
    return None


def judge_problems(spec: JudgeSpec, score_later: bool = True) -> list[Problem]:
    """Everything that keeps the judge ``spec`` from working, asked before any work: the
    judge itself (:func:`judge_problem`, status 2) and its cache (status 3)."""
    problems = []
    judge = judge_problem(spec, score_later)
    if judge is not None:
        problems.append(Problem(judge))
    cache = cache_problem()
    if cache is not None:
        problems.append(Problem(cache, JUDGE_CACHE))
    return problems
