# Copyright 2026 The lm-eval-fin authors.
"""Code execution rate (FinLFQA): the share of model-written snippets that run.

A thin evaluate adapter over :mod:`lm_eval_fin.sandbox`, which holds the rules and the
isolation; see its docstring for the sandbox's layers and their limits.
"""

import os

import datasets
import evaluate

from lm_eval_fin import citations, sandbox
from lm_eval_fin.paths import metric_path  # noqa: F401 - the examples load the module by path

_CITATION = citations.FINLFQA

_DESCRIPTION = """\
FinLFQA asks a model to back each computed value in its answer with a Python function. The
code execution rate is the share of those snippets that run: the snippet defines a function,
the function (the last one that needs no arguments, if several) is called with no arguments
and returns a value other than None (not a generator or coroutine), within the time and resource limits. It is a micro average over all
snippets of all examples. Every snippet runs in its own fresh, locked-down child process
(lm_eval_fin.sandbox): no network, no writes outside a temporary folder, no new processes,
an empty environment, limits on time, CPU, memory, file size and output.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: one list of code snippets (strings) per example, as the model wrote them;
        an example without code contributes an empty list.
    timeout: wall-clock seconds per snippet (default 5.0).
    num_workers: snippets run in parallel (default: the CPU count).
    memory_mb: address-space limit per snippet in MiB (default 512).
    confirm_run_unsafe_code: set True to run model-written code; alternatively set the
        environment variable HF_ALLOW_CODE_EVAL=1, as for evaluate's code_eval. Without
        either, compute refuses to run.
Returns:
    code_exec_rate: share of snippets that ran, in [0, 1]; 0.0 when there are no snippets
        (read it with n_snippets).
    n_snippets: number of snippets.
    n_ok: number of snippets that ran.
Examples:
    >>> code_exec_rate = evaluate.load(metric_path("code_exec_rate"))
    >>> snippets = [
    ...     ["def growth():\\n    return (150 - 120) / 120"],
    ...     ["def growth(current, previous):\\n    return current / previous - 1", "x = 1"],
    ... ]
    >>> code_exec_rate.compute(predictions=snippets, confirm_run_unsafe_code=True)
    {'code_exec_rate': 0.3333333333333333, 'n_snippets': 3, 'n_ok': 1}
"""

_WARNING = """
The "code_exec_rate" metric runs untrusted, model-written Python code. It runs each snippet
in a locked-down child process (see lm_eval_fin.sandbox for what that does and does not
stop); run it as root, so that the child can drop to an unprivileged user, or inside a
container. Once you have read this, pass confirm_run_unsafe_code=True to compute(), or set
the environment variable HF_ALLOW_CODE_EVAL="1".
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CodeExecRate(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Sequence(datasets.Value("string"))}
            ),
            homepage="https://arxiv.org/abs/2510.06426",
            codebase_urls=["https://github.com/yitaoLong/FinLFQA"],
            reference_urls=["https://arxiv.org/abs/2510.06426"],
            license="MIT",
        )

    def _compute(
        self,
        predictions,
        timeout=5.0,
        num_workers=None,
        memory_mb=512,
        confirm_run_unsafe_code=False,
    ):
        if not (confirm_run_unsafe_code or os.environ.get("HF_ALLOW_CODE_EVAL") == "1"):
            raise ValueError(_WARNING)
        snippets = [code for example in predictions for code in example or ()]
        results = sandbox.run_codes(
            snippets, timeout=timeout, workers=num_workers, memory_mb=memory_mb
        )
        return {
            "code_exec_rate": sandbox.code_exec_rate(results),
            "n_snippets": len(results),
            "n_ok": sum(result.ok for result in results),
        }
