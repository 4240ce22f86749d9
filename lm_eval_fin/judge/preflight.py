"""Can the judge a command names do its work here? Asked before any work starts.

A run that generates for hours and then finds its judge misnamed loses nothing (the samples
are logged), but the user learns late. This check is cheap, and each backend says what it
means for it (:class:`~lm_eval_fin.judge.spec.BackendKind`, ``problem``): an
openai-compatible server is asked for its models once; an hf or vllm model must be a folder,
in the local Hugging Face cache, or reachable on the hub; vllm must be importable. A server
that does not answer (an unresolvable host, https to an http server) is a problem too, for
every command: start it first, or (``run``) run without ``--judge`` and score later with
``lm-eval-fin score``. The judge cache must open and take writes (:func:`cache_problem`): a
corrupt or read-only cache is known before the model under test runs, not at its first answer.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterable

from lm_eval_fin.judge.cache import JudgeCache, JudgeCacheError
from lm_eval_fin.judge.spec import JudgeSpec, backend_kind
from lm_eval_fin.plumbing import hub
from lm_eval_fin.plumbing.exit_status import JUDGE_CACHE, Problem

# the hint a judge problem of `run` ends with (a run can go without its judge and be scored later)
SCORE_LATER = ", or run without --judge and score the logged samples later with `lm-eval-fin score`"

MODELS_TIMEOUT_S = 5.0


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 - urllib's signature
        return None


def served_models(base_url: str, api_key: str | None = None) -> list[str]:
    """The model ids an openai-compatible server lists at ``GET /models`` (OSError or
    ValueError when it does not answer sensibly)."""
    request = urllib.request.Request(f"{base_url.rstrip('/')}/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    # a redirect is answered as the HTTPError it is: the key and prompts go only where the spec says
    opener = urllib.request.build_opener(_NoRedirect)
    with opener.open(request, timeout=MODELS_TIMEOUT_S) as answer:
        listed = json.loads(answer.read()).get("data", [])
    return [str(model.get("id")) for model in listed if isinstance(model, dict)]


def model_problem(spec: JudgeSpec) -> str | None:
    """A local or hub model (hf, vllm): why it cannot be found, or None."""
    problem = hub.model_problem(spec.model)
    return None if problem is None else f"judge {spec}: cannot load the model: {problem}"


def judge_problem(spec: JudgeSpec, score_later: bool = True) -> str | None:
    """Why the judge ``spec`` cannot work here, in one line that names the fix; None if it can.
    ``score_later``: the command can run without the judge and be scored later (``run``); the
    other commands drop that hint."""
    problem = backend_kind(spec.backend).problem(spec)
    return problem if problem is None or score_later else problem.replace(SCORE_LATER, "")


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


def judge_problems(specs: Iterable[JudgeSpec], score_later: bool = True) -> list[Problem]:
    """Everything that keeps the judges ``specs`` from working, asked before any work: each
    judge itself (:func:`judge_problem`, status 2) and, once, the cache they share (status 3)."""
    specs = list(specs)
    problems = [Problem(found) for found in (judge_problem(spec, score_later) for spec in specs) if found]
    cache = cache_problem() if specs else None
    if cache is not None:
        problems.append(Problem(cache, JUDGE_CACHE))
    return problems
