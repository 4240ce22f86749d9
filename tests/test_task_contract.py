"""Every task of ours holds to what lm-eval expects of a task folder, checked through lm-eval's own
TaskManager and ConfigurableTask on the shipped samples: what lm-eval's task tests check (the
dataset loads, prompts and targets are text, a prompt does not end in whitespace when the target
delimiter is whitespace, requests build), and what its consumers of a samples file rely on
(``process_results`` gives every metric of the ``metric_list``, a number or None, for any
answer; the filter stage gives one text per document).

lm-eval's own ``tests/test_tasks.py`` runs on this task folder in ``test_lm_eval_task_tests.py``;
this module adds what that file leaves out: targets a few-shot example could show, zero-shot
configs, and the filter stage and ``process_results`` as a run calls them."""

import math

import pytest

from lm_eval_fin.harness import stage, taskfiles
from lm_eval_fin.outputs import records
from lm_eval_fin.plumbing import paths

DATA = {
    "fin_agentbench": lambda: {"data_path": str(paths.data_path("finagentbench_demo"))},
    "fin_ems": lambda: {"data_path": str(paths.data_path("ems_demo")), "judge": "none", "bertscore_model": "offline"},
    "fin_lfqa": lambda: {"data_path": str(paths.data_path("finlfqa_demo", "finlfqa_demo.jsonl")), "judge": "none",
                         "bertscore_model": "offline"},
}
TASKS = sorted(taskfiles.task_configs())
ANSWERS = ("", "1. Revenue rose 12% to $5.1 billion.\n   Evidence: ABC [1]\n   Code: none\n   Knowledge: []",
           "[2, 0, 1]")


def benchmark_of(task):
    return next(name for name in DATA if task == name or task.startswith((name + "_", name + "-")))


@pytest.fixture(scope="module")
def refine_wrapper():
    """A fin-refine model (over lm-eval's dummy model): the multi-step tasks load only beside one."""
    from lm_eval_fin.harness.multistep import MultiStepLM

    return MultiStepLM(base="dummy")


@pytest.fixture(scope="module")
def loaded(refine_wrapper):
    """Each task loaded by lm-eval's TaskManager from the installed task folder."""
    from lm_eval.tasks import TaskManager

    tasks = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(stage.PREDICT_ONLY_ENV, "0")
        patch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
        for task in TASKS:
            if task == "fin_lfqa-test":  # answers private: the task loads for --predict_only runs only
                patch.setenv(stage.PREDICT_ONLY_ENV, "1")
            manager = TaskManager(include_path=str(paths.tasks_dir()), include_defaults=False,
                                  metadata=DATA[benchmark_of(task)]())
            tasks[task] = manager.load([task])["tasks"][task]
            patch.setenv(stage.PREDICT_ONLY_ENV, "0")
    return tasks


def docs_of(task, limit=3):
    split = task.test_docs() if task.has_test_docs() else task.validation_docs()
    return [doc for _, doc in zip(range(limit), split)]


@pytest.mark.parametrize("name", TASKS)
def test_prompts_and_targets_read_as_lm_eval_expects(loaded, name):
    task = loaded[name]
    assert task.dataset is not None and (task.has_test_docs() or task.has_validation_docs())
    assert task.config.num_fewshot == 0  # whole filings per prompt: lm-eval ignores --num_fewshot
    docs = docs_of(task)
    assert docs
    delimiter = task.config.target_delimiter
    for doc in docs:
        prompt, target = task.doc_to_text(doc), task.doc_to_target(doc)
        assert isinstance(prompt, str) and prompt.strip()
        assert not (delimiter.isspace() and prompt[-1].isspace()), "prompt ends in whitespace before the delimiter"
        assert isinstance(target, str)
        if name != "fin_lfqa-test":
            assert target.strip(), "a graded document has a target a few-shot example could show"
    task.build_all_requests(rank=0, limit=2, world_size=1)
    assert len(task.instances) == min(2, len(task.eval_docs))


@pytest.mark.parametrize("name", [task for task in TASKS if task != "fin_lfqa-test"])
def test_every_listed_metric_comes_per_document_for_any_answer(loaded, name, monkeypatch):
    """lm-eval's own filter stage and process_results, as a run calls them."""
    monkeypatch.setenv(stage.PREDICT_ONLY_ENV, "0")
    task = loaded[name]
    task.build_all_requests(rank=0, limit=len(ANSWERS), world_size=1)
    instances = task.instances
    for instance, answer in zip(instances, ANSWERS * len(instances)):
        instance.resps = [answer]
    task.apply_filters()
    listed = taskfiles.metric_names(name)
    for instance in instances:
        (filtered,) = instance.filtered_resps.values()
        assert isinstance(filtered, str) and records.is_record(filtered)
        values = task.process_results(instance.doc, [filtered])
        assert list(values) == [metric for metric in listed if metric in values]  # the defined ones, in order
        for metric, value in values.items():
            assert isinstance(value, float) and math.isfinite(value), (metric, value)
        assert values["degenerate_answer"] == (1.0 if records.decode(filtered)["answer"] == "" else values["degenerate_answer"])
    empty = task.process_results(instances[0].doc, [instances[0].filtered_resps["none"]])
    assert empty["degenerate_answer"] == 1.0  # the empty answer
    aggregations = task.aggregation()
    assert set(aggregations) == set(listed)
