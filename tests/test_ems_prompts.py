"""The rendered EMS judge requests: worked examples as earlier chat turns, the scoring rubric,
the two summary-removal modes, claim checking, and the hash that covers them all."""

import doctest
import importlib
import json

import pytest

from lm_eval_fin.ems import prompts
from lm_eval_fin.ems.parsing import parse_match, parse_points, parse_score, parse_summary_bounds, parse_verdicts
from lm_eval_fin.judge import prompt_hash


def turns(request):
    """(system, [(user, assistant) examples], final user turn) of a chat request."""
    messages = request.messages
    assert messages[0]["role"] == "system" and messages[-1]["role"] == "user"
    middle = messages[1:-1]
    assert [m["role"] for m in middle] == ["user", "assistant"] * (len(middle) // 2)
    examples = [(middle[i]["content"], middle[i + 1]["content"]) for i in range(0, len(middle), 2)]
    return messages[0]["content"], examples, messages[-1]["content"]


def test_matching_shows_three_worked_examples_before_the_point():
    request = prompts.match_request("Revenue grew 5%.", ["Margins held.", "Revenue rose 5%."])
    system, examples, user = turns(request)
    assert system == prompts.MATCH_SYSTEM
    assert [json.loads(reply) for _, reply in examples] == [{"match": 2}, {"match": -1}, {"match": 3}]
    # every example reads like the real turn, and its reply parses to the intended answer
    for (example_user, reply), (_, candidates, match) in zip(examples, prompts.MATCH_EXAMPLES):
        assert example_user.startswith("Reference point:\n") and "\n\nAnswer points:\n[1] " in example_user
        assert parse_match(reply, len(candidates)) == (match - 1 if match > 0 else -1)
    # the -1 example: a shared number ("35") and a shared topic ("cloud"), but no candidate states the fact
    no_match_user = examples[1][0]
    assert "35%" in no_match_user and "35 engineers" in no_match_user and "Cloud gross margin" in no_match_user
    assert user == "Reference point:\nRevenue grew 5%.\n\nAnswer points:\n[1] Margins held.\n[2] Revenue rose 5%."
    assert request.json_schema["properties"]["match"]["maximum"] == 2


def test_scoring_rates_pair_similarity_with_four_examples_spanning_the_scale():
    request = prompts.score_request("Revenue grew 5% to $2 billion.", "Revenue grew 5%.")
    system, examples, user = turns(request)
    assert [json.loads(reply)["score"] for _, reply in examples] == [7, 10, 5, 1]
    assert [parse_score(reply, 10) for _, reply in examples] == [0.7, 1.0, 0.5, 0.1]
    # the rubric: the top is the same information with every detail; saying more or less loses points
    assert "10: the two points state exactly the same information, every detail included" in system
    assert "an answer point that adds claims its reference does not make loses points" in system
    assert "as does one that leaves out details of its reference" in system
    assert "0: they have nothing to do with each other" in system
    assert "how well the answer covers" not in system.lower()
    # the 7 says more than its reference, the 5 less: the rubric's two directions
    (ref7, ans7), _, (ref5, ans5), _ = [example_user.split("\n\n") for example_user, _ in examples]
    assert len(ans7) > len(ref7) and "freight" in ans7 and "freight" not in ref7
    assert "28%" in ref5 and "28%" not in ans5
    assert user == "Reference point:\nRevenue grew 5% to $2 billion.\n\nAnswer point:\nRevenue grew 5%."


def test_scoring_examples_follow_the_scale():
    system, examples, _ = turns(prompts.score_request("a", "b", max_score=5))
    assert [json.loads(reply)["score"] for _, reply in examples] == [4, 5, 3, 1]
    assert "integer from 0 to 5" in system and "5: the two points state exactly the same" in system
    assert [prompts.example_score(s, 100) for s in (7, 10, 5, 1)] == [70, 100, 50, 10]


def test_extraction_examples_follow_the_summary_mode():
    text = "Revenue grew 5%. Margins held."
    round_system, round_examples, user = turns(prompts.extract_request(text))
    folded_system, folded_examples, _ = turns(prompts.extract_request(text, summary_removal="folded"))
    assert user == f"Answer:\n{text}"
    assert "set aside any opening passage" in folded_system and "set aside" not in round_system
    assert len(round_examples) == len(folded_examples) == 2
    for (round_user, round_reply), (folded_user, folded_reply), (intro, body, outro, points) in zip(
        round_examples, folded_examples, prompts.EXTRACT_EXAMPLES
    ):
        assert round_user == f"Answer:\n{body}"
        assert folded_user == f"Answer:\n{intro}{body}{outro}"
        assert parse_points(round_reply) == parse_points(folded_reply) == list(points)
        assert not any(intro.strip() in point or outro.strip() in point for point in points)
    # the second example keeps its repeated point
    repeated = parse_points(round_examples[1][1])
    assert repeated[0] == repeated[2]
    with pytest.raises(ValueError, match="summary_removal"):
        prompts.extract_request(text, summary_removal="both")


def test_summary_removal_numbers_the_units_and_shows_two_examples():
    units = ["Here is the overview.", "Revenue grew 5%.", "Overall, fine."]
    request = prompts.summary_request(units)
    system, examples, user = turns(request)
    assert user == "Numbered units of the answer:\n[1] Here is the overview.\n[2] Revenue grew 5%.\n[3] Overall, fine."
    assert [json.loads(reply) for _, reply in examples] == [{"opening": 1, "closing": 1}, {"opening": 0, "closing": 0}]
    for (_, reply), (example_units, _) in zip(examples, prompts.SUMMARY_EXAMPLES):
        assert parse_summary_bounds(reply, len(example_units)) is not None
    assert "Never count the whole answer" in system
    assert request.json_schema["properties"]["opening"]["maximum"] == 2


def test_claim_checking_lists_the_claims_against_the_text():
    request = prompts.claims_request("Revenue grew 5%.", ["Revenue grew 5%.", "Margins fell."])
    system, examples, user = turns(request)
    assert user == "Text:\nRevenue grew 5%.\n\nClaims:\n[1] Revenue grew 5%.\n[2] Margins fell."
    ((_, reply),) = examples
    assert parse_verdicts(reply, 3) == ["entailment", "neutral", "contradiction"]
    assert all(verdict in system for verdict in prompts.CLAIM_VERDICTS)
    schema = request.json_schema["properties"]["verdicts"]
    assert schema["minItems"] == schema["maxItems"] == 2 and schema["items"]["enum"] == list(prompts.CLAIM_VERDICTS)


def test_no_example_company_is_in_the_demo_set():
    from lm_eval_fin.plumbing import paths

    demo = (paths.data_path("ems_demo") / "earnings_call_qa.jsonl").read_text()
    examples = json.dumps(
        [prompts.SUMMARY_EXAMPLES, prompts.EXTRACT_EXAMPLES, prompts.MATCH_EXAMPLES, prompts.SCORE_EXAMPLES,
         prompts.CLAIMS_EXAMPLES]
    )
    for company in ("Northwind", "Contoso"):
        assert company in demo and company not in examples


def test_the_prompts_hash_covers_every_example(monkeypatch):
    before = prompts.EMS_PROMPTS_HASH
    assert before == prompt_hash(*prompts.PROMPT_PARTS)
    for name in ("SUMMARY_EXAMPLES", "EXTRACT_EXAMPLES", "MATCH_EXAMPLES", "SCORE_EXAMPLES", "CLAIMS_EXAMPLES",
                 "SCORE_SYSTEM", "EXTRACT_SYSTEM_FOLDED", "CLAIMS_USER"):
        assert any(part is getattr(prompts, name) for part in prompts.PROMPT_PARTS), name
    changed = [part[:-1] + ((("x",), 0),) if part is prompts.SCORE_EXAMPLES else part for part in prompts.PROMPT_PARTS]
    assert prompt_hash(*changed) != before


@pytest.mark.parametrize("module", ["prompts", "parsing", "summary", "claims", "formulas", "offline"])
def test_module_doctests(module):
    result = doctest.testmod(importlib.import_module(f"lm_eval_fin.ems.{module}"))
    assert result.failed == 0 and result.attempted > 0
