"""What every evaluate module of metrics/ owes its users, checked the way evaluate checks its
own (test_metric_common): the examples in its docstring run against the module's own globals,
its MetricInfo names the paper, the code it follows and the licence, and it loads by path."""

import doctest
import importlib.util

import evaluate
import pytest

from lm_eval_fin import paths

MODULES = sorted(p.name for p in paths.metrics_dir().iterdir() if (p / f"{p.name}.py").is_file())


def load_module(name):
    spec = importlib.util.spec_from_file_location(f"{name}_module", paths.metrics_dir() / name / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_shipped_module_is_checked():
    assert MODULES == ["code_exec_rate", "ems", "evidence_f1", "fin_numeric_match", "ndcg_rerank"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run_with_the_modules_own_globals(name, monkeypatch):
    monkeypatch.setenv("HF_ALLOW_CODE_EVAL", "1")  # code_exec_rate's example runs snippets
    result = doctest.testmod(load_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0


@pytest.mark.parametrize("name", MODULES)
def test_metric_info_cites_and_locates(name):
    info = evaluate.load(paths.metric_path(name))._info()
    assert info.citation.lstrip().startswith("@") and info.description and info.inputs_description
    assert info.homepage.startswith("https://arxiv.org/abs/")
    assert info.reference_urls and all(url.startswith("https://") for url in info.reference_urls)
    assert isinstance(info.codebase_urls, list) and info.license == "MIT"
