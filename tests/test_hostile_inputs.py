"""Hostile answers (invalid UTF-8, lone surrogates, NUL, terminal escapes, deep nesting,
megabytes of text) are read as bounded, printable text by every parser and metric: a result
or a parse failure for that answer, never an exception. Time and memory are measured in
bench/bench_hostile.py, not asserted here."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lm_eval_fin import attribution
from lm_eval_fin.ems.parsing import parse_match, parse_points, parse_score
from lm_eval_fin.measures import numbers, ranking, textsim
from lm_eval_fin.text import cleantext, jsontext

NASTY = st.one_of(
    st.text(),
    st.lists(st.sampled_from(["\ud800", "\udfff", "\x00", "\x1b[31m", "\x1b]0;t\x07", "\x9b", "[", "{", "]", "}",
                              "\n", "1.", "Evidence:", "CWT [3]", "```", "5%", "$1.2bn"]), max_size=60).map("".join),
    st.binary(),
    st.none(),
    st.integers(),
)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_read_answer_bounds_and_cleans():
    text, cut = cleantext.read_answer("a\ud800b\x00c\x1b[1;31md\x1b]0;title\x07e\x9b1mf\x9d" + "x" * 10)
    assert (text, cut) == ("a\ufffdbcdef" + "x" * 10, False)
    text, cut = cleantext.read_answer("y" * (cleantext.MAX_ANSWER_CHARS + 5))
    assert cut and len(text) == cleantext.MAX_ANSWER_CHARS
    assert cleantext.read_answer(b"\xff\xfeok")[0] == "\ufffd\ufffdok"
    json.dumps(text, ensure_ascii=False).encode("utf-8")  # writable as UTF-8


@FAST
@given(NASTY)
def test_every_parser_reads_any_answer(value):
    text = cleantext.read_answer(value)[0]
    text.encode("utf-8")  # no lone surrogate survives
    answer = attribution.parse_answer(value, ["CWT", "AWK"])
    assert isinstance(answer.parse_failure, bool)
    answer.text.encode("utf-8")
    assert all(isinstance(v, float) for v in numbers.extract_numbers(value))
    ranked = ranking.parse_ranking(value, list(range(5)), labels={0: "10-K"})
    assert ranked is None or set(ranked) <= set(range(5))
    assert parse_points(text) is None or isinstance(parse_points(text), list)
    assert parse_match(text, 3) in (None, -1, 0, 1, 2)
    score = parse_score(text, 10)
    assert score is None or 0.0 <= score <= 1.0
    jsontext.parse_json_object(value)
    (p, r, f), = textsim.rouge_l([value if isinstance(value, str) else text], ["revenue rose 5%"])
    assert 0.0 <= f <= 1.0


def test_megabytes_and_deep_nesting_are_bounded_reads():
    big = "1. Revenue rose 5% to $2 billion.\nEvidence: CWT [1]\n" * 300_000  # about 15 MB
    answer = attribution.parse_answer(big, ["CWT"])
    assert not answer.parse_failure and len(answer.text) < cleantext.MAX_ANSWER_CHARS
    assert numbers.extract_numbers(big) == [5.0, 2e9]  # each value once
    nested = "[" * 200_000 + "1" + "]" * 200_000
    assert ranking.parse_ranking(nested[:100] + "1" + "]" * 100, [1, 2]) == [1]
    assert ranking.parse_ranking(nested, [1, 2]) is None  # the list is past the characters read
    assert jsontext.parse_json_object("{" * 100_000) is None
    assert parse_points("[" * 100_000) is None
    (p, r, f), = textsim.rouge_l([" ".join(f"w{i}" for i in range(400_000))], ["w1 w2 w3"])
    assert f > 0


def test_every_task_counts_the_answers_it_cut(monkeypatch):
    """A megabyte answer is scored on its start and counted in truncated_answers, per task: the
    filter stage cuts it and says so in the record, process_results counts it."""
    from lm_eval_fin.benchmarks.fin_agentbench import task as agentbench
    from lm_eval_fin.benchmarks.fin_ems import task as ems
    from lm_eval_fin.benchmarks.fin_lfqa import task as lfqa
    from lm_eval_fin.outputs import records
    from lm_eval_fin.plumbing import paths

    monkeypatch.delenv("LM_EVAL_FIN_PREDICT_ONLY", raising=False)
    huge = "[1, 0, 2]" + " filler" * (cleantext.MAX_ANSWER_CHARS // 7 + 10)
    docs = {
        agentbench: agentbench.load_document_ranking(data_path=str(paths.data_path("finagentbench_demo")))["test"][0],
        ems: ems.load_dataset(data_path=str(paths.data_path("ems_demo")), judge="none",
                              bertscore_model="offline")["test"][0],
        lfqa: lfqa.load_validation(data_path=str(paths.data_path("finlfqa_demo", "finlfqa_demo.jsonl")), judge="none",
                                   bertscore_model="offline")["validation"][0],
    }
    for module, doc in docs.items():
        texts = module.score_answers([[huge], ["[1, 0, 2]"]], [doc, doc])
        assert len(records.decode(texts[0])["answer"]) == cleantext.MAX_ANSWER_CHARS, module
        assert [module.process_results(doc, [text])["truncated_answers"] for text in texts] == [1.0, 0.0], module
