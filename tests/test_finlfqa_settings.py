"""FinLFQA's post-hoc and iterative settings: their steps (by hand, with scripted replies for
the protocol logic, since the embedded model's replies cannot be foretold), the fin-refine
model wrapper around lm-eval's own dummy model, and the tasks' loaders. The embedded model
runs them end to end in test_e2e_finlfqa.py."""

import importlib.util

import pytest
from lm_eval.api.instance import Instance

from lm_eval_fin import attribution
from lm_eval_fin.benchmarks.fin_lfqa import data, prompt, refine, task
from lm_eval_fin.harness import multistep
from lm_eval_fin.harness.settings import SettingsError
from lm_eval_fin.outputs import records
from lm_eval_fin.plumbing import paths
from tests.finlfqa_fixtures import hub_record, write_hub_fixture


def _utils():
    spec = importlib.util.spec_from_file_location("fin_lfqa_utils", paths.tasks_dir() / "fin_lfqa" / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


UTILS = _utils()


def document(protocol="", **metadata):
    settings = task.BENCHMARK.read_settings("fin_lfqa-iterative", {"judge": "none", **metadata})
    return dict(data.to_document(hub_record(), index_base=0), protocol=protocol, settings=settings.to_json())


class ScriptedModel:
    """Replies by step: the prompt's kind picks the next reply of that kind's script."""

    def __init__(self, **scripts):
        self.scripts = {kind: list(replies) for kind, replies in scripts.items()}
        self.calls = []

    def __call__(self, which, prompts):
        self.calls.append((list(which), [self.kind(p) for p in prompts]))
        return [self.scripts[self.kind(p)].pop(0) for p in prompts]

    @staticmethod
    def kind(text):
        if text.startswith("You are a financial analyst reviewing"):
            return "feedback"
        if "Revised analysis:" in text:
            return "revision"
        if "Attributes of each clause:" in text:
            return "attribution"
        raise AssertionError(text[:80])


# ----------------------------------------------------------------------------------- post-hoc


@pytest.mark.parametrize(
    "answer, clauses",
    [
        ("1. CWT's expense rose 25%.\n2. AWK's was flat\nat $110 million.", [(1, "CWT's expense rose 25%."),
                                                                            (2, "AWK's was flat at $110 million.")]),
        ("Here is the answer:\n**1.** First.\n3) Second.", [(None, "Here is the answer:"), (1, "First."),
                                                           (3, "Second.")]),
        ("No numbering at all.", [(None, "No numbering at all.")]),
        ("", []),
    ],
)
def test_answer_clauses(answer, clauses):
    assert refine.answer_clauses(answer) == clauses


def test_merge_attributes_by_hand():
    answer = "1. CWT's expense rose 25% to $125 million.\n2. AWK's was flat.\n3. CWT borrowed more."
    attributes = (
        "1. Evidence: CWT [1]\nCode:\n```python\ndef growth(new, old):\n    return (new - old) / old * 100\n```\n"
        "Knowledge: [0]\n2. Evidence: AWK [1]\nCode: none\nKnowledge: []\n"
    )
    final, read = refine.merge_attributes(answer, attributes, ["CWT", "AWK"])
    parsed = attribution.parse_answer(final, ["CWT", "AWK"])
    assert read and not parsed.parse_failure
    assert [c.text for c in parsed.clauses] == ["CWT's expense rose 25% to $125 million.", "AWK's was flat.",
                                               "CWT borrowed more."]
    assert [c.evidence for c in parsed.clauses] == [(("CWT", 1),), (("AWK", 1),), ()]
    assert parsed.clauses[0].code == ("def growth(new, old):\n    return (new - old) / old * 100",)
    assert parsed.knowledge == {0}
    # attributes of clauses the answer does not have join its last clause
    final, _ = refine.merge_attributes("1. One claim.", "1. Evidence: CWT [1]\n2. Evidence: AWK [2]\nKnowledge: [1]",
                                       ["CWT", "AWK"])
    assert attribution.parse_answer(final, ["CWT", "AWK"]).evidence == {("CWT", 1), ("AWK", 2)}
    # "inferred from clause 1" survives the merge
    final, _ = refine.merge_attributes("1. A.\n2. B.", "1. Evidence: CWT [1]\n2. Evidence: inferred from clause 1",
                                       ["CWT"])
    assert attribution.parse_answer(final, ["CWT"]).clauses[1].inferred_from == (1,)


def test_merge_goes_by_clause_number():
    """A reply that skips a clause number keeps each attribute on the clause of its number
    (by position, clause 3's evidence would land on clause 2 and clause 2 would get none)."""
    answer = "1. CWT's expense rose 25%.\n2. AWK's was flat.\n3. CWT borrowed more."
    attributes = "1. Evidence: CWT [1]\nKnowledge: [0]\n3. Evidence: CWT [7]; inferred from clause 1\nKnowledge: [4]"
    final, read = refine.merge_attributes(answer, attributes, ["CWT", "AWK"])
    clauses = attribution.parse_answer(final, ["CWT", "AWK"]).clauses
    assert read and [c.text for c in clauses] == ["CWT's expense rose 25%.", "AWK's was flat.", "CWT borrowed more."]
    assert [c.evidence for c in clauses] == [(("CWT", 1),), (), (("CWT", 7),)]
    assert [c.knowledge for c in clauses] == [(0,), (), (4,)]
    # the answer skips a number: "inferred from clause 4" follows clause 4 to its new place, 2
    final, _ = refine.merge_attributes("1. A.\n4. B.\n5. C.", "5. Evidence: inferred from clause 4\n4. Evidence: CWT [2]",
                                       ["CWT"])
    clauses = attribution.parse_answer(final, ["CWT"]).clauses
    assert [c.evidence for c in clauses] == [(), (("CWT", 2),), ()]
    assert clauses[2].inferred_from == (2,)
    # an unnumbered reply goes by position
    final, _ = refine.merge_attributes("1. A.\n2. B.", "Evidence: CWT [3]", ["CWT"])
    assert [c.evidence for c in attribution.parse_answer(final, ["CWT"]).clauses] == [(("CWT", 3),), ()]


def test_unreadable_attributes_leave_the_answer_unattributed():
    final, read = refine.merge_attributes("1. A claim of 5%.", "I cannot tell.", ["CWT"])
    assert (final, read) == ("1. A claim of 5%.", False)
    assert attribution.parse_answer(final).parse_failure  # scored as a parse failure, on its text


def test_posthoc_asks_once_per_document_in_one_batch():
    docs = [document("fin_lfqa-posthoc"), document("fin_lfqa-posthoc")]
    model = ScriptedModel(attribution=["1. Evidence: CWT [1]\nKnowledge: [0]", "nothing"])
    outcomes = refine.posthoc(docs, ["1. Up 25%.", "1. Flat."], model)
    assert model.calls == [([0, 1], ["attribution", "attribution"])]
    assert attribution.parse_answer(outcomes[0][0], ["CWT"]).evidence == {("CWT", 1)}
    assert outcomes[0][1]["attributes_read"] and not outcomes[1][1]["attributes_read"]
    assert [s["step"] for s in outcomes[0][1]["steps"]] == ["answer", "attribution"]


# -------------------------------------------------------------------------- iterative refinement


GOOD = "1. CWT's expense rose 25%.\nEvidence: CWT [1]\nCode:\n```python\ndef g():\n    return 25.0\n```\nKnowledge: [0]"
NEEDS_ARGS = "1. CWT's expense rose 25%.\nEvidence: CWT [1]\nCode:\n```python\ndef g(a, b):\n    return a / b\n```"


@pytest.mark.parametrize("reply, done", [("Done", True), (" **Done.** ", True), ("done", True),
                                         ("Clause 1 is wrong. Done", False), ("", False), ("Not done", False)])
def test_is_done(reply, done):
    assert refine.is_done(reply) is done


def test_the_analysis_shows_what_each_snippet_gave_in_the_sandbox():
    results = refine.run_snippets([GOOD, NEEDS_ARGS, "1. No code.\nEvidence: CWT [1]"], [["CWT"]] * 3)
    assert results[0] == [(1, "returned 25.0")]
    assert results[1][0][0] == 1 and results[1][0][1].startswith("failed") and "argument" in results[1][0][1]
    assert results[2] == []
    shown = refine.with_results(NEEDS_ARGS, results[1])
    assert shown.startswith(NEEDS_ARGS) and "- code 1 (clause 1): failed" in shown
    assert refine.with_results("1. x", []).endswith("the analysis has no code.")


def test_iterative_stops_at_done_and_after_max_rounds():
    docs = [document("fin_lfqa-iterative", max_rounds=2) for _ in range(3)]
    model = ScriptedModel(
        # round 1: doc 0 is done; docs 1 and 2 get feedback. Round 2: doc 1 done, doc 2 not
        feedback=["Done", "Fix the code: it needs arguments.", "Clause 1 lacks evidence.", "Done", "Still wrong."],
        revision=[GOOD, "", GOOD],  # doc 2's first revision is empty: the last analysis is kept
    )
    outcomes = refine.iterative(docs, [GOOD, NEEDS_ARGS, NEEDS_ARGS], model)
    assert model.calls == [
        ([0, 1, 2], ["feedback"] * 3), ([1, 2], ["revision"] * 2),
        ([1, 2], ["feedback"] * 2), ([2], ["revision"]),
    ]
    texts, traces = zip(*outcomes)
    assert texts == (GOOD, GOOD, GOOD)
    assert [(t["rounds"], t["done"]) for t in traces] == [(1, True), (2, True), (2, False)]
    assert [s["step"] for s in traces[2]["steps"]] == ["answer", "feedback", "revision", "feedback", "revision"]
    # the reviewer saw the execution results of the analysis it reviewed
    assert traces[1]["steps"][1]["executions"][0].startswith("failed")
    assert traces[1]["steps"][3]["executions"] == ["returned 25.0"]


def test_feedback_from_another_model(judge_cache):
    """Issue 36, point 7 (the paper's Table 5): feedback_model names the model that reviews;
    the model under test only revises. A failed feedback request ends that document's
    refinement, said in its trace."""
    from tests.openai_server import ServerProcess

    with ServerProcess() as server:
        spec = f"openai:{server.base_url}#reviewer"
        docs = [document("fin_lfqa-iterative", max_rounds=2, feedback_model=spec) for _ in range(2)]
        # the echo server repeats the prompt it gets (a review that is not "Done"), or fails
        # where the analysis asks it to
        model = ScriptedModel(revision=[GOOD, GOOD])
        outcomes = refine.iterative(docs, [NEEDS_ARGS, NEEDS_ARGS + "\n[[status:500]]"], model)
        stats = server.stats()
    assert model.calls == [([0], ["revision"]), ([0], ["revision"])]  # no feedback asked of the model
    texts, traces = zip(*outcomes)
    assert texts == (GOOD, NEEDS_ARGS + "\n[[status:500]]")
    assert traces[0]["feedback_model"] == spec and traces[0]["rounds"] == 2 and not traces[0].get("feedback_failed")
    assert traces[0]["steps"][1]["reply"].startswith("echo: You are a financial analyst reviewing")
    assert traces[1]["feedback_failed"] and traces[1]["rounds"] == 1 and traces[1]["steps"][1]["reply"] == ""
    assert stats["calls"] >= 3  # round 1 (two documents, one of them failing) and round 2 (one) went to it
    assert {body["model"] for body in stats["bodies"]} == {"reviewer"}
    assert {body.get("max_tokens") or body.get("max_completion_tokens") for body in stats["bodies"]} == {2048}
    # self-feedback is the default, and a malformed spec stops the load
    assert document("fin_lfqa-iterative")  # no feedback_model: the model under test reviews
    with pytest.raises(SettingsError, match="feedback_model"):
        document("fin_lfqa-iterative", feedback_model="nonsense")


def test_the_feedback_prompt_holds_the_execution_results():
    doc = document()
    analysis = refine.with_results(GOOD, [(1, "returned 25.0")])
    text = prompt.build_feedback_prompt(doc, analysis)
    assert "- code 1 (clause 1): returned 25.0" in text and "single word Done" in text
    revision = prompt.build_revision_prompt(doc, analysis, "Cite paragraph 2.")
    assert "Cite paragraph 2." in revision and "[1] Interest coverage" in revision


# ----------------------------------------------------------------------------- the wrapper


def test_the_wrapper_needs_a_base_model():
    with pytest.raises(ValueError, match="base must name another lm-eval model"):
        multistep.MultiStepLM()
    with pytest.raises(ValueError, match="base='nonexistent'"):
        multistep.MultiStepLM(base="nonexistent")


def _request(doc, task_name, doc_id):
    return Instance("generate_until", doc, ("prompt", {"until": [], "max_gen_toks": 8}), 0, (task_name, doc_id, 1))


def test_the_wrapper_runs_protocols_around_lm_evals_dummy_model():
    """lm-eval's dummy model answers "lol" to everything: the post-hoc step then reads no
    attributes, the reviewer never says "Done", so refinement runs max_rounds rounds; a
    document without a protocol is the base model's alone."""
    model = multistep.MultiStepLM(base="dummy")
    assert multistep.wrapper_loaded()
    posthoc, iterative, plain = (dict(document(p, max_rounds=2), id=f"d{i}")
                                 for i, p in enumerate(("fin_lfqa-posthoc", "fin_lfqa-iterative", "")))
    replies = model.generate_until([_request(posthoc, "fin_lfqa-posthoc", 0),
                                    _request(iterative, "fin_lfqa-iterative", 0), _request(plain, "fin_lfqa", 0)])
    assert replies == ["lol", "lol", "lol"]
    post_trace = multistep.take_trace("fin_lfqa-posthoc", posthoc)
    assert [s["step"] for s in post_trace["steps"]] == ["answer", "attribution"] and not post_trace["attributes_read"]
    trace = multistep.take_trace("fin_lfqa-iterative", iterative)
    assert (trace["rounds"], trace["done"]) == (2, False) and len(trace["steps"]) == 5
    assert multistep.take_trace("fin_lfqa", plain) is None
    assert multistep.take_trace("fin_lfqa-iterative", iterative) is None  # taken once
    with pytest.raises(ValueError, match="asks for protocol 'nope'"):
        model.generate_until([_request(dict(plain, protocol="nope"), "x", 0)])


def test_multistep_tasks_need_the_wrapper(tmp_path):
    path = str(write_hub_fixture(tmp_path / "copy.jsonl"))
    if multistep.wrapper_loaded():
        pytest.skip("a fin-refine model is alive in this process")
    for loader in (UTILS.load_posthoc, UTILS.load_iterative):
        with pytest.raises(SettingsError, match="--model fin-refine --model_args base="):
            loader(bertscore_model="offline", data_path=path)
    assert UTILS.load_validation(bertscore_model="offline", data_path=path, judge="none")["validation"][0]["protocol"] == ""


def test_multistep_tasks_list_their_metrics():
    from lm_eval_fin.harness import taskfiles

    end_to_end = set(taskfiles.higher_is_better("fin_lfqa"))
    assert set(taskfiles.higher_is_better("fin_lfqa-posthoc")) == end_to_end
    assert set(taskfiles.higher_is_better("fin_lfqa-iterative")) == end_to_end | {"refine_rounds", "refine_done"}
    doc = document("fin_lfqa-iterative")
    results = task.process_results(doc, [GOOD])
    assert set(results) <= end_to_end
    # no trace (an answer lm-eval's --use_cache served): no rounds known, left out
    assert not {"refine_rounds", "refine_done"} & set(results)
    traced = task.process_results(doc, [records.encode(GOOD, {"trace": {"rounds": 2, "done": True, "steps": []}})])
    assert (traced["refine_rounds"], traced["refine_done"]) == (2.0, 1.0)


def test_the_filter_stage_keeps_each_documents_steps_in_its_record(monkeypatch):
    """The steps the wrapper ran for a document reach its record, scored or --predict_only."""
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
    docs = [dict(document("fin_lfqa-iterative", bertscore_model="offline"), id=f"doc{i}") for i in range(2)]
    trace = {"rounds": 1, "done": False, "steps": [{"step": "answer", "reply": GOOD}]}
    for predict in ("0", "1"):
        monkeypatch.setenv("LM_EVAL_FIN_PREDICT_ONLY", predict)
        multistep.keep_trace("fin_lfqa-iterative", docs[0], trace)
        kept = [records.decode(text) for text in task.score_answers([["1. Up."], ["1. Flat."]], docs)]
        assert [r["trace"] for r in kept] == [trace, None]
        assert ("bertscore_f1" in kept[0]) == (predict == "0")  # scored, or only kept
