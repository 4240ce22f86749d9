"""The hand-over of lm-eval's own vLLM engine to a ``vllm:`` judge (lm_eval_fin/harness/engines.py):
the judge layer calls the harness's hook before a judge engine starts, and the hook finds the
model of the evaluation in progress on the stack, wrappers unwrapped, shuts its engine down and
leaves a stand-in that starts it again on use. lm-eval's vLLM model class needs vLLM, so a class
of the same module name stands in for it here; tests_vllm/ runs the real one."""

import sys
import types
from types import SimpleNamespace

import pytest

from lm_eval_fin.harness import engines
from lm_eval_fin.judge import vllm_backend


class FakeEngine:
    def __init__(self, **model_args):
        self.model_args = model_args
        self.shut = False
        self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=4096),
                                          engine_core=SimpleNamespace(shutdown=self.shutdown))

    def shutdown(self):
        self.shut = True

    def generate(self, prompts):
        return [f"out {p}" for p in prompts]


@pytest.fixture
def vllm_models(monkeypatch):
    """A stand-in ``lm_eval.models.vllm_causallms`` with a ``VLLM`` class, and a stand-in
    ``lm_eval.evaluator.evaluate`` (a function of that module name that calls back with ``lm``
    as its local, as lm-eval's does while a judged metric runs)."""
    module = types.ModuleType("lm_eval.models.vllm_causallms")

    class VLLM:
        def __init__(self, **model_args):
            self.model_args = model_args
            self.model = FakeEngine(**model_args)

    module.VLLM = VLLM
    monkeypatch.setitem(sys.modules, "lm_eval.models.vllm_causallms", module)
    namespace = {"__name__": "lm_eval.evaluator"}
    exec("def evaluate(lm, during):\n    return during()\n", namespace)
    monkeypatch.setattr(engines.vllm_backend, "new_engine", lambda **kwargs: FakeEngine(**kwargs))
    return VLLM, namespace["evaluate"]


def test_the_model_being_evaluated_is_found_through_its_wrappers(vllm_models):
    VLLM, evaluate = vllm_models
    inner = VLLM(pretrained="/m")
    caching = SimpleNamespace(lm=inner)  # lm-eval's CachingLM keeps the model as .lm
    refine = SimpleNamespace(base=caching)  # fin-refine keeps it as .base
    assert evaluate(refine, engines.models_being_evaluated) == [inner]
    assert engines.models_being_evaluated() == []  # outside an evaluation: nothing
    other = VLLM(pretrained="/other")  # alive, but not being evaluated: left alone
    assert evaluate(inner, engines.models_being_evaluated) == [inner] and not other.model.shut


def test_the_judge_engine_start_parks_the_model_engine_and_it_comes_back_on_use(vllm_models):
    VLLM, evaluate = vllm_models
    model = VLLM(pretrained="/m", dtype="float32")
    engine = model.model
    assert engines.park_model_engines in vllm_backend._before_start  # registered by importing the harness

    def judge_engine_starts():
        for hook in vllm_backend._before_start:
            hook()
        return model.model

    parked = evaluate(model, judge_engine_starts)
    assert engine.shut and isinstance(parked, engines.ParkedEngine)
    # lm-eval reads the config of a parked engine without starting it
    assert parked.llm_engine.model_config.max_model_len == 4096 and parked._live is None
    # generating again starts the model's engine from its arguments
    assert parked.generate(["p"]) == ["out p"] and parked._live.model_args == {"pretrained": "/m", "dtype": "float32"}
    live = parked._live
    assert evaluate(model, engines.park_model_engines) == 1 and live.shut and parked._live is None
    assert evaluate(model, engines.park_model_engines) == 0  # parked already: nothing to do
