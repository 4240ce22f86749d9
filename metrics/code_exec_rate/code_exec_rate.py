# Copyright 2026 The lm-eval-fin authors.
"""Code execution rate (FinLFQA): the share of model-written snippets that run.

A thin evaluate adapter over :mod:`lm_eval_fin.sandbox`, which holds the rules and the
isolation; see its docstring for the sandbox's layers and their limits.
"""

import os

import datasets
import evaluate

from lm_eval_fin import citations, sandbox
from lm_eval_fin.cleantext import WritableInputs
from lm_eval_fin.paths import metric_path  # noqa: F401 - the examples load the module by path

_CITATION = citations.FINLFQA

_DESCRIPTION = """\
FinLFQA asks a model to back each computed value in its answer with a Python function. The
code execution rate is the share of those snippets that run: the snippet defines a function,
the function (the last one that needs no arguments, if several) is called with no arguments
and returns a value other than None (not a generator or coroutine), within the time and
resource limits. It is a micro average over all snippets of all examples. Beside it, the
share of snippets that failed in each way (code_missing_arguments, code_none_result,
code_syntax, ...), for comparison with the paper's error analysis. Every snippet runs in its
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
    code_exec_rate: share of snippets that ran, in [0, 1]; 0.0 when there are no snippets
        (read it with n_snippets).
    n_snippets: number of snippets.
    n_ok: number of snippets that ran.
    code_<category>: share of all snippets that failed in that way, one key per category
        (code_syntax, code_no_function, code_missing_arguments, code_exception,
        code_none_result, code_generator, code_refused, code_resource, code_timeout; see
        lm_eval_fin.sandbox.ExecResult); with code_exec_rate they add up to 1 (all 0.0
        when there are no snippets).
Examples:
    Three snippets: one runs, one needs arguments it is not given, one defines no function.

    >>> code_exec_rate = evaluate.load(metric_path("code_exec_rate"))
    >>> snippets = [
    ...     ["def growth():\\n    return (150 - 120) / 120"],
    ...     ["def growth(current, previous):\\n    return current / previous - 1", "x = 1"],
    ... ]
    >>> results = code_exec_rate.compute(predictions=snippets, confirm_run_unsafe_code=True)
    >>> results["code_exec_rate"], results["n_snippets"], results["n_ok"]
    (0.3333333333333333, 3, 1)
    >>> {name: round(results[name], 4) for name in sandbox.failure_categories([]) if results[name]}
    {'code_no_function': 0.3333, 'code_missing_arguments': 0.3333}

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
        snippets = [code for example in predictions for code in example or ()]
        results = sandbox.run_codes(
            snippets, timeout=timeout, workers=num_workers, memory_mb=memory_mb
        )
        return {
            "code_exec_rate": sandbox.code_exec_rate(results),
            "n_snippets": len(results),
            "n_ok": sum(result.ok for result in results),
            **sandbox.failure_categories(results),
        }
