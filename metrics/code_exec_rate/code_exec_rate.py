# Copyright 2026 The lm-eval-fin authors.
"""Code execution rate (FinLFQA): the share of model-written snippets that run.

A thin evaluate adapter over :mod:`lm_eval_fin.sandbox`, which holds the rules and the
isolation; see its docstring for the sandbox's layers and their limits.
"""

import os

import datasets
import evaluate

from lm_eval_fin import sandbox
from lm_eval_fin.plumbing.paths import metric_path  # noqa: F401 - the examples load the module by path
from lm_eval_fin.text import citations
from lm_eval_fin.text.cleantext import WritableInputs

_CITATION = citations.FINLFQA

_DESCRIPTION = """\
FinLFQA asks a model to back each computed value in its answer with a Python function. The
code execution rate is the share of those snippets that run: the snippet defines a function,
the function (the last one that needs no arguments, if several) is called with no arguments
and returns a value other than None (not a generator or coroutine), within the time and
resource limits. code_exec_rate is, as the fin_lfqa task's metric of that name, the mean over
the examples with code of the share of each example's snippets that ran; snippet_exec_rate
is the share of all snippets that ran (micro, the count the paper's section 4.3 describes).
Beside them, per example with code and averaged the same way, the share of snippets that
failed in each way (code_missing_arguments, code_none_result, code_syntax, ...). Every snippet runs in its
own fresh, locked-down child process (lm_eval_fin.sandbox) with the standard library, numpy
and pandas: no network, no writes outside a temporary folder, no new processes, limits on
time, CPU, memory, file size and output.
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
    code_exec_rate: for each example with code, the share of its snippets that ran; the mean
        over those examples, in [0, 1] (the fin_lfqa task's code_exec_rate). None when no
        example has code.
    snippet_exec_rate: the share of all snippets that ran (micro, as the paper counts);
        None when there are no snippets.
    n_snippets: number of snippets.
    n_ok: number of snippets that ran.
    code_<category>: per example with code, the share of its snippets that failed in that
        way, averaged as code_exec_rate (code_syntax, code_no_function,
        code_missing_arguments, code_exception, code_none_result, code_generator,
        code_refused, code_resource, code_timeout; see lm_eval_fin.sandbox.ExecResult); with
        code_exec_rate they add up to 1; None when no example has code.
Examples:
    Three snippets: one runs, one needs arguments it is not given, one defines no function.

    >>> code_exec_rate = evaluate.load(metric_path("code_exec_rate"))
    >>> snippets = [
    ...     ["def growth():\\n    return (150 - 120) / 120"],
    ...     ["def growth(current, previous):\\n    return current / previous - 1", "x = 1"],
    ... ]
    >>> results = code_exec_rate.compute(predictions=snippets, confirm_run_unsafe_code=True)
    >>> results["code_exec_rate"], results["snippet_exec_rate"], results["n_snippets"], results["n_ok"]
    (0.5, 0.3333333333333333, 3, 1)
    >>> {name: results[name] for name in sandbox.failure_categories([]) if results[name]}
    {'code_no_function': 0.25, 'code_missing_arguments': 0.25}

    numpy and pandas are there; writing outside the snippet's folder is refused.

    >>> pandas_code = "import pandas as pd\\ndef f():\\n    return float(pd.Series([1.5, 2.5]).mean())"
    >>> writes_outside = "def g():\\n    return open('/tmp/x', 'w')"
    >>> results = code_exec_rate.compute(predictions=[[pandas_code, writes_outside]], confirm_run_unsafe_code=True)
    >>> results["code_exec_rate"], results["code_refused"]
    (0.5, 0.5)
"""

_WARNING = """
The "code_exec_rate" metric runs untrusted, model-written Python code. It runs each snippet
in a locked-down child process (see lm_eval_fin.sandbox for what that does and does not
stop). Run as root, the child switches to an unprivileged user (uid 65534); run as another
user, snippets run as that same user, held by the seccomp filter, Landlock (where the kernel
has it) and an audit hook only: prefer root in a container. Once you have read this, pass
confirm_run_unsafe_code=True to compute(), or set the environment variable
HF_ALLOW_CODE_EVAL="1".
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CodeExecRate(WritableInputs, evaluate.Metric):
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
        examples = [list(example or ()) for example in predictions]
        results = sandbox.run_codes(
            [code for example in examples for code in example], timeout=timeout, workers=num_workers, memory_mb=memory_mb
        )
        per_example, start = [], 0
        for example in examples:  # each example's results, for the per-answer mean
            if example:
                per_example.append(results[start: start + len(example)])
            start += len(example)
        return {
            **_per_answer_means(per_example),
            "snippet_exec_rate": sandbox.code_exec_rate(results) if results else None,
            "n_snippets": len(results),
            "n_ok": sum(result.ok for result in results),
        }


def _per_answer_means(per_example: list) -> dict:
    """code_exec_rate and code_<category>: each example with code, the shares of its own
    snippets, averaged over those examples (the fin_lfqa task's figures); None without code."""
    shares = [{"code_exec_rate": sandbox.code_exec_rate(r), **sandbox.failure_categories(r)} for r in per_example]
    keys = ["code_exec_rate", *sandbox.failure_categories([])]
    return {key: sum(s[key] for s in shares) / len(shares) if shares else None for key in keys}
