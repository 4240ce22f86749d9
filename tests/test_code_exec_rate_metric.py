"""metrics/code_exec_rate: the evaluate module, loaded by path offline, runs real snippets."""


import evaluate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lm_eval_fin.benchmarks.fin_lfqa import score
from lm_eval_fin.plumbing.paths import metric_path
from lm_eval_fin.sandbox import FAILURE_CATEGORIES

RUNS = "def growth():\n    return (150 - 120) / 120\n"
NEEDS_ARGUMENTS = "def growth(current, previous):\n    return current / previous - 1\n"
RETURNS_NONE = "def growth():\n    value = 0.25\n"
BAD_INDENT = "def growth():\n    a = 1\n      return a\n"


@pytest.fixture(scope="module")
def metric():
    return evaluate.load(metric_path("code_exec_rate"))


CATEGORY_KEYS = [f"code_{name}" for name in FAILURE_CATEGORIES]
NO_FAILURES = dict.fromkeys(CATEGORY_KEYS, 0.0)


def compute(metric, predictions, **kwargs):
    return metric.compute(predictions=predictions, confirm_run_unsafe_code=True, **kwargs)


def test_hand_computed_rate_is_the_per_answer_mean_as_the_tasks(metric):
    """Issue 36, point 4: code_exec_rate means what the fin_lfqa task's metric of that name
    means (each answer with code, the share of its own snippets that ran, averaged);
    snippet_exec_rate is the paper's count over all snippets."""
    # per answer: 1/2, 0, 1/2 -> 1/3; over all snippets: 2 of 5
    predictions = [[RUNS, RETURNS_NONE], [NEEDS_ARGUMENTS], [], [RUNS, BAD_INDENT]]
    result = compute(metric, predictions)
    assert result == pytest.approx({
        "code_exec_rate": 1 / 3, "snippet_exec_rate": 0.4, "n_snippets": 5, "n_ok": 2,
        **NO_FAILURES, "code_none_result": 1 / 6, "code_missing_arguments": 1 / 3, "code_syntax": 1 / 6,
    })  # fmt: skip
    # the task's per-answer values, averaged as lm-eval does: an answer without code leaves the
    # metric out of its sample, and lm-eval's mean runs over the answers that have it
    outcomes = [[{"ok": True, "category": None}, {"ok": False, "category": "none_result"}],
                [{"ok": False, "category": "missing_arguments"}], None,
                [{"ok": True, "category": None}, {"ok": False, "category": "syntax"}]]
    values = [score.code_values(o, CATEGORY_KEYS) for o in outcomes]
    for key in ["code_exec_rate", *CATEGORY_KEYS]:
        defined = [v[key] for v in values if v.get(key) is not None]
        assert sum(defined) / len(defined) == pytest.approx(result[key])


def test_all_running_and_none_running(metric):
    assert compute(metric, [[RUNS], [RUNS]]) == {
        "code_exec_rate": 1.0, "snippet_exec_rate": 1.0, "n_snippets": 2, "n_ok": 2, **NO_FAILURES}
    none_running = compute(metric, [[RETURNS_NONE, NEEDS_ARGUMENTS, BAD_INDENT]])
    assert none_running["code_exec_rate"] == 0.0 == none_running["snippet_exec_rate"]
    assert sum(none_running[key] for key in CATEGORY_KEYS) == 1.0


def test_no_snippets_is_undefined_with_count_zero(metric):
    expected = {"code_exec_rate": None, "snippet_exec_rate": None, "n_snippets": 0, "n_ok": 0,
                **dict.fromkeys(CATEGORY_KEYS)}
    assert compute(metric, []) == expected
    assert compute(metric, [[], []]) == expected


def test_numpy_and_pandas_snippets_run(metric):
    code = "import numpy as np, pandas as pd\ndef f():\n    return float(pd.Series(np.arange(4)).sum())\n"
    assert compute(metric, [[code]], timeout=30)["n_ok"] == 1


def test_limits_are_passed_to_the_sandbox(metric):
    slow = "import time\ndef f():\n    time.sleep(30)\n    return 1\n"
    timed = compute(metric, [[slow, RUNS]], timeout=1, num_workers=2)
    assert (timed["n_ok"], timed["code_timeout"]) == (1, 0.5)
    greedy = "def f():\n    return len(bytearray(200 * 2**20))\n"
    limited = compute(metric, [[greedy]], memory_mb=100)
    assert (limited["n_ok"], limited["code_resource"]) == (0, 1.0)


def test_refuses_to_run_code_without_opt_in(metric, monkeypatch):
    monkeypatch.delenv("HF_ALLOW_CODE_EVAL", raising=False)
    with pytest.raises(ValueError, match="confirm_run_unsafe_code=True"):
        metric.compute(predictions=[[RUNS]])
    monkeypatch.setenv("HF_ALLOW_CODE_EVAL", "0")
    with pytest.raises(ValueError, match="HF_ALLOW_CODE_EVAL"):
        metric.compute(predictions=[[RUNS]])


def test_environment_variable_is_an_opt_in_too(metric, monkeypatch):
    monkeypatch.setenv("HF_ALLOW_CODE_EVAL", "1")
    assert metric.compute(predictions=[[RUNS]])["n_ok"] == 1


def test_wrong_input_shape_gets_a_clear_error(metric):
    with pytest.raises(ValueError, match="expected a list"):
        compute(metric, [RUNS])  # a snippet where a list of snippets belongs


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(
    st.lists(
        st.lists(
            st.one_of(
                st.text(max_size=200),
                st.binary(max_size=200).map(lambda junk: junk.decode("latin-1")),
                st.just("x" * (1 << 20)),
                st.just("```python\n```\n```"),
            ),
            max_size=3,
        ),
        max_size=3,
    )
)
def test_bad_snippets_never_crash_and_stay_in_range(metric, predictions):
    result = compute(metric, predictions)
    n_snippets = sum(len(example) for example in predictions)
    assert result["n_snippets"] == n_snippets
    assert 0 <= result["n_ok"] <= n_snippets
    assert result["code_exec_rate"] is None or 0.0 <= result["code_exec_rate"] <= 1.0
    shares = [result[key] for key in CATEGORY_KEYS]
    if n_snippets:
        assert all(0.0 <= share <= 1.0 for share in shares)
        assert abs(sum(shares) + result["code_exec_rate"] - 1.0) < 1e-9
    else:
        assert result["code_exec_rate"] is None and shares == [None] * len(shares)
