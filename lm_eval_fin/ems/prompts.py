"""Judge prompts of the three EMS stages, in our own words.

They follow the structure the EMS paper describes (guidelines, two in-context examples for
extraction, one reference point against the whole indexed answer-point list for matching, an
integer score on completeness, accuracy and level of detail) and ask for JSON, with a JSON
Schema the backends that support constrained decoding can enforce. The parsers in
:mod:`lm_eval_fin.ems.parsing` read the outputs tolerantly either way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from lm_eval_fin.judge import JudgeRequest, chat_request, prompt_hash

# Output budgets (tokens) of the two stages whose answers are tiny; extraction restates a
# whole answer, so its budget follows the text (extract_budget) unless the caller sets one.
MATCH_MAX_TOKENS = 32
SCORE_MAX_TOKENS = 32

# The extraction budget: twice a generous token estimate of the text (a JSON restatement is
# the text again plus quotes, commas and escapes), plus room for the wrapper, within bounds.
CHARS_PER_TOKEN = 3  # English runs about 4 characters a token; figures and symbols fewer
EXTRACT_MIN_TOKENS = 256
EXTRACT_MAX_TOKENS = 8192
EXTRACT_OVERHEAD_TOKENS = 64

# An object around the list (the paper's output is a plain JSON list): OpenAI-compatible
# structured output requires an object at the top; the parser reads either form.
POINTS_SCHEMA = {
    "type": "object",
    "properties": {"points": {"type": "array", "items": {"type": "string"}}},
    "required": ["points"],
}

EXTRACT_SYSTEM = """You split a long answer into saliency points: short, self-contained statements that together carry all of its information.

Guidelines:
1. First set aside any opening passage that only introduces or frames the answer, and any closing passage that only sums it up or concludes. They are not points.
2. Every other statement of the answer becomes a point of at most two sentences.
3. Keep every detail: figures, percentages, amounts, dates, periods, names and comparisons. A point that drops a number loses information; a longer point that keeps it is better.
4. If the answer states the same thing more than once, list it again each time it appears. Do not merge or remove repeated points.
5. Stay close to the answer's own wording. Do not add, correct or interpret anything.

Reply with JSON only: {"points": [...]}, a list of strings, one per point, in the order of the answer."""

# Two worked examples (fictional company) that set the level of detail: one answer in prose
# with an introduction and a conclusion, one in bullets with a repeated point.
EXTRACT_EXAMPLES: tuple[tuple[str, list[str]], ...] = (
    (
        "Here is an overview of what management said on the call.\n\n"
        "Northwind Tools grew revenue 12% year over year to $4.2 billion, driven by its "
        "professional segment. Gross margin narrowed to 38.5% from 40.1% because steel costs "
        "rose. The company expects fourth-quarter revenue between $4.3 and $4.5 billion and "
        "will open two distribution centres in Texas next year.\n\n"
        "Overall, the quarter shows solid demand despite cost pressure.",
        [
            "Northwind Tools grew revenue 12% year over year to $4.2 billion, driven by its professional segment.",
            "Gross margin narrowed to 38.5% from 40.1% because steel costs rose.",
            "The company expects fourth-quarter revenue between $4.3 and $4.5 billion.",
            "The company will open two distribution centres in Texas next year.",
        ],
    ),
    (
        "Key risks highlighted:\n"
        "- Tariffs on imported components could raise costs by about $60 million in 2025.\n"
        "- A ransomware incident in August disrupted two plants for five days; the company has "
        "since added network segmentation.\n"
        "- Tariffs on imported components could raise costs by about $60 million in 2025.\n\n"
        "In summary, management sees the risks as manageable.",
        [
            "Tariffs on imported components could raise costs by about $60 million in 2025.",
            "A ransomware incident in August disrupted two plants for five days; the company has since added network segmentation.",
            "Tariffs on imported components could raise costs by about $60 million in 2025.",
        ],
    ),
)

MATCH_SYSTEM = """You compare one reference point with a numbered list of answer points and pick the answer point that conveys the same information.

Rules:
- Two points match when they state the same fact, event, figure or claim, even in other words. A related topic alone is not a match.
- A shared number supports a match only when it describes the same thing in the same context: "revenue grew 35%" does not match "the team added 35 people".
- If several answer points qualify, pick the one closest in content and detail.
- If none qualifies, answer -1.

Reply with JSON only: {"match": <number of the answer point>} or {"match": -1}."""

SCORE_SYSTEM = """You grade how well an answer point covers a reference point it was matched to, on an integer scale from 0 to {max_score}.

Consider:
- completeness: does the answer point carry all the information of the reference point?
- accuracy: do its facts and figures agree with the reference point, without contradictions?
- level of detail: does it keep the specifics (numbers, periods, names), or only the gist?

{max_score} means the answer point fully and accurately covers the reference point with the same detail; 0 means it covers none of it or contradicts it.

Reply with JSON only: {{"score": <integer from 0 to {max_score}>}}."""


# The user turns of the three stages (the system prompts and examples are above).
EXTRACT_USER = "Answer:\n{text}"
MATCH_USER = "Reference point:\n{reference_point}\n\nAnswer points:\n{listing}"
MATCH_LISTING_ITEM = "[{number}] {point}"
SCORE_USER = "Reference point:\n{reference_point}\n\nAnswer point:\n{answer_point}"


def estimate_tokens(text: str) -> int:
    """A generous estimate of the tokens of ``text`` for any tokenizer (no tokenizer needed)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def extract_budget(text: str) -> int:
    """The extraction output budget for ``text``: 2 x :func:`estimate_tokens` +
    :data:`EXTRACT_OVERHEAD_TOKENS`, within [:data:`EXTRACT_MIN_TOKENS`,
    :data:`EXTRACT_MAX_TOKENS`].

    >>> extract_budget("Revenue grew 5%."), extract_budget("x" * 6000)
    (256, 4064)
    """
    wanted = 2 * estimate_tokens(text) + EXTRACT_OVERHEAD_TOKENS
    return max(EXTRACT_MIN_TOKENS, min(EXTRACT_MAX_TOKENS, wanted))


def extract_request(text: str, max_tokens: int | None = None) -> JudgeRequest:
    """Turn ``text`` (an answer or a reference) into a JSON list of saliency points.

    ``max_tokens`` None gives the text its own budget (:func:`extract_budget`), so a long
    answer restated is not cut (a cut list does not parse and would fall back to the offline
    extractor)."""
    examples = [
        (EXTRACT_USER.format(text=example_text), json.dumps({"points": example_points}, ensure_ascii=False))
        for example_text, example_points in EXTRACT_EXAMPLES
    ]
    budget = extract_budget(text) if max_tokens is None else max_tokens
    return chat_request(
        EXTRACT_SYSTEM, EXTRACT_USER.format(text=text), examples, max_tokens=budget, json_schema=POINTS_SCHEMA
    )


def match_schema(n_answer_points: int) -> dict:
    return {
        "type": "object",
        "properties": {"match": {"type": "integer", "minimum": -1, "maximum": max(n_answer_points, 1)}},
        "required": ["match"],
    }


def match_request(
    reference_point: str, answer_points: Sequence[str], max_tokens: int = MATCH_MAX_TOKENS
) -> JudgeRequest:
    """Pick the answer point (numbered from 1) that matches ``reference_point``, or -1."""
    listing = "\n".join(
        MATCH_LISTING_ITEM.format(number=number, point=point)
        for number, point in enumerate(answer_points, start=1)
    )
    content = MATCH_USER.format(reference_point=reference_point, listing=listing)
    return chat_request(
        MATCH_SYSTEM,
        content,
        max_tokens=max_tokens,
        json_schema=match_schema(len(answer_points)),
    )


def score_schema(max_score: int) -> dict:
    return {
        "type": "object",
        "properties": {"score": {"type": "integer", "minimum": 0, "maximum": max_score}},
        "required": ["score"],
    }


def score_request(
    reference_point: str, answer_point: str, max_score: int = 10, max_tokens: int = SCORE_MAX_TOKENS
) -> JudgeRequest:
    """Grade a matched pair 0..max_score."""
    content = SCORE_USER.format(reference_point=reference_point, answer_point=answer_point)
    return chat_request(
        SCORE_SYSTEM.format(max_score=max_score),
        content,
        max_tokens=max_tokens,
        json_schema=score_schema(max_score),
    )


# Everything that shapes a request: system prompts, examples, user turns and output schemas.
EMS_PROMPTS_HASH = prompt_hash(
    EXTRACT_SYSTEM,
    EXTRACT_EXAMPLES,
    EXTRACT_USER,
    POINTS_SCHEMA,
    MATCH_SYSTEM,
    MATCH_USER,
    MATCH_LISTING_ITEM,
    match_schema(0),
    SCORE_SYSTEM,
    SCORE_USER,
    score_schema(0),
)
