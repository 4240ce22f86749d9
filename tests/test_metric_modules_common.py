"""What every evaluate module of metrics/ owes its users, checked the way evaluate checks its
own (test_metric_common): the examples in its docstring run against the module's own globals,
its MetricInfo names the paper, the code it follows and the licence, and it loads by path."""

import doctest
import importlib.util

import evaluate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_fin.plumbing import paths

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


# ------------------------------------------- any str, one bad document costs only that document

# text with lone surrogates (what a model's bytes decoded with surrogateescape hold), controls
# and anything else unicode has
HOSTILE = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=()), max_size=60),
    st.builds(lambda a, b: a + "\ud800" + b + "\udfff", st.text(max_size=20), st.text(max_size=20)),
)
GOOD_ANSWER = "1. Revenue rose 25% to $125 million.\nEvidence: CWT [1]\nKnowledge: [2]"
GOOD_REFERENCE = {"companies": ["CWT"], "paragraphs": [1], "knowledge": [2]}


@pytest.fixture(scope="module")
def loaded():
    return {name: evaluate.load(paths.metric_path(name)) for name in MODULES}


def mean_of_singles(metric, predictions, references, **kwargs):
    singles = [metric.compute(predictions=[p], references=[r], **kwargs) for p, r in zip(predictions, references)]
    return {key: sum(s[key] for s in singles) / len(singles) for key in singles[0] if key.startswith(("numeric_", "evidence_"))}


@settings(max_examples=15, deadline=None)
@given(HOSTILE)
def test_text_modules_take_any_str_and_a_bad_document_costs_only_itself(loaded, text):
    numeric = loaded["fin_numeric_match"]
    predictions, references = ["Revenue was $5 million.", text], ["5 million", text]
    batch = numeric.compute(predictions=predictions, references=references)
    singles = mean_of_singles(numeric, predictions, references)
    assert {key: batch[key] for key in singles} == pytest.approx(singles)

    evidence = loaded["evidence_f1"]
    references = [GOOD_REFERENCE, {"companies": [text], "paragraphs": [1], "knowledge": []}]
    batch = evidence.compute(predictions=[GOOD_ANSWER, text], references=references)
    singles = mean_of_singles(evidence, [GOOD_ANSWER, text], references)
    assert {key: batch[key] for key in singles} == pytest.approx(singles)

    ranked = loaded["ndcg_rerank"].compute(predictions=[["a", "b"], [text, "a"]],
                                           references=[{"ids": ["a", "b"], "grades": [2.0, 0.0]},
                                                       {"ids": [text, "a"], "grades": [1.0, 0.0]}], k=2)
    assert ranked["ndcg@2"] == pytest.approx(1.0)  # both rankings are perfect, whatever the ids hold


def test_ems_and_code_modules_take_lone_surrogates(loaded, monkeypatch):
    monkeypatch.setenv("HF_ALLOW_CODE_EVAL", "1")
    ems = loaded["ems"].compute(predictions=["Revenue rose 6% to $5 million.", "bad \ud800 answer"],
                                references=["Revenue rose 6% to $5 million.", "\udcff"], scorers=["rouge"])
    assert 0.0 <= ems["ems_offline_rouge_f1"] <= 1.0
    code = loaded["code_exec_rate"].compute(predictions=[["def f():\n    return 1"], ["def g():\n    return '\ud800'"]])
    assert code["n_snippets"] == 2 and code["n_ok"] >= 1
