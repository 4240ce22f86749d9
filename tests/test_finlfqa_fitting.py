"""Issue 36, point 3: FinLFQA prompts longer than the model's context lost their instructions
and format example to lm-eval's cut from the left. Now the report excerpts are cut when the
dataset loads, from the end of the longer excerpt first, to fit the setting's longest prompt;
a prompt that cannot fit stops the load; the cuts are counted per document."""

import json

import pytest

from lm_eval_fin.benchmarks.fin_lfqa import data, prompt, task
from lm_eval_fin.harness.fitting import prompt_fitter
from lm_eval_fin.harness.settings import SettingsError
from tests.finlfqa_fixtures import hub_record, write_hub_fixture
from tests.test_finlfqa import UTILS

LONG_CWT = [f"CWT paragraph {i}: operating revenue was ${i}.5 million and costs were ${i}.1 million." * 3
            for i in range(40)]
SHORT_AWK = [f"AWK paragraph {i}: customers numbered {i} million." for i in range(6)]


def long_record():
    return hub_record(context=json.dumps({"CWT": LONG_CWT, "AWK": SHORT_AWK}))


def test_reports_split_and_join_back():
    reports = data.to_document(long_record(), index_base=1)["reports"]
    blocks = data.split_reports(reports)
    assert [len(paragraphs) for _, paragraphs in blocks] == [40, 6]
    assert data.join_reports(blocks) == reports
    table = data.to_document(hub_record(), index_base=0)["reports"]  # a table paragraph runs over several lines
    assert data.join_reports(data.split_reports(table)) == table
    assert [len(p) for _, p in data.split_reports(table)] == [3, 2]


def test_an_over_long_prompt_loses_report_paragraphs_not_its_instructions(tmp_path, embedded_model_dir):
    path = write_hub_fixture(tmp_path / "long.jsonl", [long_record()])
    metadata = {"pretrained": str(embedded_model_dir), "max_length": 1400, "max_gen_toks": 256}
    doc = UTILS.load_validation(data_path=str(path), judge="none", bertscore_model="offline", **metadata)["validation"][0]
    assert doc["truncated"] and doc["prompt_tokens"] > 1400 - 256
    fitter = prompt_fitter(metadata, 256, "fin_lfqa")
    text = prompt.build_prompt(doc)
    assert fitter.prompt_tokens(text) <= 1400 - 256
    # the instructions, the format example, the question and the knowledge list are whole
    whole = prompt.build_prompt(data.to_document(long_record(), index_base=doc["index_base"]))
    assert text.startswith(whole[: whole.index("The excerpts of the quarterly")])
    assert text.endswith(whole[whole.index("\n\nQuestion: "):])
    # the longer excerpt lost paragraphs from its end; the short one kept all of its own
    blocks = data.split_reports(doc["reports"])
    cwt, awk = (paragraphs for _, paragraphs in blocks)
    dropped = doc["dropped_paragraphs"]
    assert 0 < dropped < 40 and cwt[-1] == prompt.CUT_MARK.format(count=dropped)
    assert cwt[-2].startswith(f"[{39 - dropped + doc['index_base']}] CWT paragraph {39 - dropped}:") and len(awk) == 6
    assert UTILS.process_results(doc, [json.dumps({"answer": "1. X.\nEvidence: CWT [1]"})])["truncated_documents"] == 1.0

    roomy = UTILS.load_validation(data_path=str(path), judge="none", bertscore_model="offline",
                                  **dict(metadata, max_length=32768))["validation"][0]
    assert not roomy["truncated"] and roomy["dropped_paragraphs"] == 0 and roomy["reports"] == whole_reports(roomy)
    with pytest.raises(SettingsError, match="record cwt-awk-1: max_length 600 cannot hold the prompt without its "
                                            "report excerpts"):
        UTILS.load_validation(data_path=str(path), judge="none", bertscore_model="offline",
                              **dict(metadata, max_length=600))


def whole_reports(doc):
    return data.to_document(long_record(), index_base=doc["index_base"])["reports"]


@pytest.mark.parametrize("protocol, longest", [
    ("fin_lfqa-posthoc", lambda d: prompt.build_attribution_prompt(d, "")),
    ("fin_lfqa-iterative", lambda d: prompt.build_revision_prompt(d, "", "")),
])
def test_multistep_prompts_leave_room_for_what_the_model_writes_into_them(embedded_model_dir, protocol, longest):
    """The post-hoc attribution prompt holds the answer, the iterative revision prompt the
    analysis (with its results) and the feedback: each up to max_gen_toks."""
    fitter = prompt_fitter({"pretrained": str(embedded_model_dir), "max_length": 4000}, 200, "fin_lfqa")
    doc = dict(data.to_document(long_record(), index_base=1), protocol=protocol)
    [fitted] = task.fit_documents([doc], fitter, protocol)
    written = 200 if protocol == "fin_lfqa-posthoc" else 400 + prompt.RESULTS_RESERVE_TOKENS
    assert fitted["truncated"]
    assert fitter.prompt_tokens(longest(fitted)) + written <= 4000 - 200
    end_to_end = task.fit_documents([dict(doc, protocol="")], fitter, "fin_lfqa")[0]
    assert end_to_end["dropped_paragraphs"] < fitted["dropped_paragraphs"]


def test_a_tokenizer_that_does_not_load_stops_the_load(tmp_path):
    path = write_hub_fixture(tmp_path / "copy.jsonl")
    with pytest.raises(SettingsError, match="fin_lfqa: cannot fit prompts"):
        UTILS.load_validation(data_path=str(path), judge="none", bertscore_model="offline",
                              pretrained=str(tmp_path / "no-model"))
    doc = UTILS.load_validation(data_path=str(path), judge="none", bertscore_model="offline")["validation"][0]
    assert not doc["truncated"] and doc["prompt_tokens"] == -1


def test_an_answer_that_copies_the_worked_example_counts_a_syntax_failure():
    """Issue 36, point 4: the example's code slot, copied as the answer's code, is a snippet
    that does not compile: a code_syntax failure counted in code_exec_rate (the READMEs say so)."""
    from lm_eval_fin import attribution
    from lm_eval_fin.benchmarks.fin_lfqa import score

    copied = prompt.build_prompt(data.to_document(hub_record(), index_base=1)).split(
        "An example of the format (made-up companies ABC and XYZ):\n")[1].split("\nIn the example,")[0]
    snippets = attribution.parse_answer(copied, ["ABC", "XYZ"]).code
    assert snippets == (prompt.CODE_SLOT,)
    [outcomes] = score.run_code([snippets])
    values = score.code_values(outcomes, ["code_syntax", "code_no_function", "code_missing_arguments"])
    assert values["code_exec_rate"] == 0.0 and values["code_syntax"] == 1.0
