"""Judge prompts of the EMS pass, in our own words, with worked examples.

They follow the structure of the EMS paper's appendix: the judge sees guidelines, then worked
examples as earlier chat turns (:func:`lm_eval_fin.judge.chat_request`), then the text to work
on. The examples are fictional companies of our own (none is in the shipped demo set).

* summary removal (a round of its own when ``summary_removal="round"``, as the paper does it
  before extraction): the text as numbered units; the judge says how many leading units only
  introduce it and how many trailing units only sum it up. Two examples.
* extraction: a JSON list of saliency points; two examples set the level of detail (one with
  a repeated point). With ``summary_removal="folded"`` the extraction prompt also tells the
  judge to leave the summaries out, and its examples show them left out.
* matching: one reference point against the numbered answer points, the best one or -1;
  three examples (a plain match, a -1 where only the topic and a number coincide, a choice
  among several related candidates).
* scoring: the similarity of a matched pair on 0..max_score, the top meaning the same
  information with every detail, an answer point that says more or less than its reference
  losing points; four examples whose scores are 7, 10, 5 and 1 on 0..10, as the paper's.
* claim checking (the RAGChecker-style metrics, Ru et al. 2024): a text and a numbered list of
  claims; a verdict per claim (entailment, neutral, contradiction). One example.

Every request asks for JSON with a JSON Schema the backends that support constrained decoding
enforce; the parsers in :mod:`lm_eval_fin.ems.parsing` read the outputs tolerantly either way.
:data:`EMS_PROMPTS_HASH` covers every system prompt, example, user turn and schema.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from lm_eval_fin.judge import JudgeRequest, chat_request, prompt_hash

SUMMARY_REMOVAL_MODES = ("round", "folded")

# Output budgets (tokens) of the stages whose answers are tiny; extraction restates a whole
# text, so its budget follows the text (extract_budget) unless the caller sets one.
SUMMARY_MAX_TOKENS = 32
MATCH_MAX_TOKENS = 32
SCORE_MAX_TOKENS = 32
CLAIMS_TOKENS_PER_CLAIM = 12  # '"contradiction", ' is 4-5 tokens; room for a tolerant reply
CLAIMS_MIN_TOKENS = 32

# Claims checked in one request: RAGChecker checks five jointly by default (joint_check_num).
CLAIMS_PER_REQUEST = 5

# The extraction budget: twice a generous token estimate of the text (a JSON restatement is
# the text again plus quotes, commas and escapes), plus room for the wrapper, within bounds.
CHARS_PER_TOKEN = 3  # English runs about 4 characters a token; figures and symbols fewer
EXTRACT_MIN_TOKENS = 256
EXTRACT_MAX_TOKENS = 8192
EXTRACT_OVERHEAD_TOKENS = 64

LISTING_ITEM = "[{number}] {text}"

# ---------------------------------------------------------------------- summary removal

SUMMARY_SYSTEM = """You prepare a long answer for point-by-point comparison. The answer is given as numbered units (sentences and list items, in order).

Many answers open with a passage that only introduces or frames what follows ("Here is an overview of the call", "Management discussed the following themes:") and close with a passage that only sums up or concludes what was already said ("Overall, the quarter was strong"). Those passages repeat the body and are set aside before the body is split into points.

Count them:
- "opening": how many units at the start only introduce or frame the answer;
- "closing": how many units at the end only sum up or conclude it.

A unit that states a fact, a figure or a claim of its own belongs to the body, wherever it stands; when in doubt, keep it (count it out). Never count the whole answer.

Reply with JSON only: {"opening": <integer>, "closing": <integer>}."""

SUMMARY_USER = "Numbered units of the answer:\n{listing}"

# (units, (opening, closing)): an answer with a framing opener and a concluding sentence, and
# one that starts with its facts and has no summary at all.
SUMMARY_EXAMPLES: tuple[tuple[tuple[str, ...], tuple[int, int]], ...] = (
    (
        (
            "The call covered three main areas, outlined below.",
            "Fabrikam Foods grew organic sales 4%, with price increases contributing three points.",
            "Snack volumes fell 1% in North America.",
            "The company raised its full-year dividend to $1.10 per share.",
            "In short, pricing carried the quarter while volumes stayed soft.",
        ),
        (1, 1),
    ),
    (
        (
            "Litware's cloud revenue grew 35% year over year to $2.2 billion.",
            "- Licence revenue declined 8% as customers moved to subscriptions.",
            "- The company expects operating margin of about 30% next year.",
        ),
        (0, 0),
    ),
)

# -------------------------------------------------------------------------- extraction

_EXTRACT_GUIDELINES = """1. Every statement of the answer becomes a point of at most two sentences.
2. Keep every detail: figures, percentages, amounts, dates, periods, names, causes and comparisons. A point that drops a number loses information; a longer point that keeps it is better.
3. If the answer states the same thing more than once, list it again each time it appears. Do not merge or remove repeated points.
4. Stay close to the answer's own wording. Do not add, correct, judge or interpret anything."""

_EXTRACT_FOLDED_GUIDELINE = (
    "0. First set aside any opening passage that only introduces or frames the answer, and any closing "
    "passage that only sums it up or concludes. They are not points."
)

_EXTRACT_SYSTEM_TEMPLATE = """You split a long answer into saliency points: short, self-contained statements that together carry all of its information.

Guidelines:
{guidelines}

Reply with JSON only: {{"points": [...]}}, a list of strings, one per point, in the order of the answer."""

EXTRACT_SYSTEM = _EXTRACT_SYSTEM_TEMPLATE.format(guidelines=_EXTRACT_GUIDELINES)
"""The extraction prompt when summaries were removed in a round of their own."""

EXTRACT_SYSTEM_FOLDED = _EXTRACT_SYSTEM_TEMPLATE.format(
    guidelines=f"{_EXTRACT_FOLDED_GUIDELINE}\n{_EXTRACT_GUIDELINES}"
)
"""The extraction prompt that removes the summaries itself (``summary_removal="folded"``)."""

EXTRACT_USER = "Answer:\n{text}"

# (introduction, body, conclusion, points): the body alone is the example text after a
# summary-removal round; with the introduction and conclusion around it, the folded example.
EXTRACT_EXAMPLES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "Below is a summary of the main themes of the call.\n\n",
        "Fabrikam Foods grew organic sales 4% in the quarter, with price increases contributing three "
        "points, while snack volumes fell 1% in North America. Gross margin widened to 36.2% from 34.9% "
        "because packaging costs eased. Management expects full-year organic growth of 3-4% and will close "
        "its Ohio bakery by June to cut about $40 million of annual costs.",
        "\n\nAll in all, pricing carried the quarter while volumes stayed soft.",
        (
            "Fabrikam Foods grew organic sales 4% in the quarter, with price increases contributing three points.",
            "Snack volumes fell 1% in North America.",
            "Gross margin widened to 36.2% from 34.9% because packaging costs eased.",
            "Management expects full-year organic growth of 3-4%.",
            "Fabrikam will close its Ohio bakery by June to cut about $40 million of annual costs.",
        ),
    ),
    (
        "Risks management pointed to:\n",
        "- A customs dispute in Brazil could delay about $120 million of hardware shipments into 2025.\n"
        "- A phishing attack in May exposed support tickets of 3,000 customers; Litware has since made "
        "hardware security keys mandatory for staff.\n"
        "- A customs dispute in Brazil could delay about $120 million of hardware shipments into 2025.",
        "\n\nTaken together, these risks look contained.",
        (
            "A customs dispute in Brazil could delay about $120 million of hardware shipments into 2025.",
            "A phishing attack in May exposed support tickets of 3,000 customers; Litware has since made "
            "hardware security keys mandatory for staff.",
            "A customs dispute in Brazil could delay about $120 million of hardware shipments into 2025.",
        ),
    ),
)

# ---------------------------------------------------------------------------- matching

MATCH_SYSTEM = """You compare one reference point with a numbered list of answer points and pick the answer point that conveys the same information.

Rules:
- Two points match when they state the same fact, event, figure or claim, even in other words. Sharing a topic is not enough.
- A shared number makes a match more likely only when it describes the same thing in the same context: "revenue grew 35%" and "the team hired 35 people" share a number and nothing else.
- Go through the answer points one by one. If several of them state the reference point's information, pick the one closest to it in content and detail.
- If none states it, answer -1.

Reply with JSON only: {"match": <number of the answer point>} or {"match": -1}."""

MATCH_USER = "Reference point:\n{reference_point}\n\nAnswer points:\n{listing}"

# (reference point, answer points, number of the match or -1)
MATCH_EXAMPLES: tuple[tuple[str, tuple[str, ...], int], ...] = (
    (
        "Fabrikam's organic sales rose 4%, three points of it from higher prices.",
        (
            "Fabrikam raised its full-year dividend to $1.10 per share.",
            "Organic sales grew 4%, with price increases contributing three percentage points.",
            "Snack volumes fell 1% in North America.",
        ),
        2,
    ),
    (
        "Litware's cloud revenue grew 35% year over year.",
        (
            "Litware hired 35 engineers for its new support centre in Dublin.",
            "Cloud gross margin improved to 71% from 68%.",
            "Licence revenue declined 8% as customers moved to subscriptions.",
        ),
        -1,
    ),
    (
        "Adatum expects capital expenditure of about $2.4 billion in 2025, mostly for new fabrication capacity.",
        (
            "Adatum spent $610 million on capital projects in the third quarter.",
            "Adatum plans to keep investing in manufacturing capacity next year.",
            "Capital spending in 2025 should be roughly $2.4 billion, most of it going to new fabs.",
            "Free cash flow was $300 million.",
        ),
        3,
    ),
)

# ----------------------------------------------------------------------------- scoring

SCORE_SYSTEM = """You rate how similar two key points are, a reference point and an answer point, with an integer from 0 to {max_score}.

- {max_score}: the two points state exactly the same information, every detail included (figures, periods, names, causes), even if worded differently.
- 1 to {below_max}: they share some of their information but not all of it; the more they share, the closer to {max_score}. Information that one point has and the other lacks lowers the score, whichever point has it: an answer point that adds claims its reference does not make loses points, as does one that leaves out details of its reference.
- 0: they have nothing to do with each other.

Weigh completeness (does each point carry everything the other says?), accuracy (are the shared facts and figures the same, in the same context? a contradiction scores low) and level of detail (is the answer point as specific as the reference point, no more and no less?).

Reply with JSON only: {{"score": <integer from 0 to {max_score}>}}."""

SCORE_USER = "Reference point:\n{reference_point}\n\nAnswer point:\n{answer_point}"

EXAMPLE_SCALE = 10  # the scale of SCORE_EXAMPLES' scores, as in the paper's examples

# (reference point, answer point, score on 0..EXAMPLE_SCALE): an answer point that says more
# (7), the same information reworded (10), one that says less (5), a shared topic only (1).
SCORE_EXAMPLES: tuple[tuple[str, str, int], ...] = (
    (
        "Fabrikam's operating margin rose to 14.2% from 13.1%.",
        "Operating margin rose to 14.2% from 13.1%, helped by lower freight costs, and management expects "
        "further gains next year.",
        7,
    ),
    (
        "Litware bought back $500 million of shares in the quarter and has $1.5 billion left under its "
        "repurchase authorisation.",
        "In the quarter the company repurchased $500 million of stock; $1.5 billion of the buyback "
        "authorisation remains.",
        10,
    ),
    (
        "Adatum's data-centre revenue grew 28% to $3.1 billion on demand for AI accelerators.",
        "Data-centre revenue grew on strong demand for AI accelerators.",
        5,
    ),
    (
        "Adatum expects gross margin of 45-46% next quarter as the new fabs ramp up.",
        "Executives discussed several manufacturing initiatives, including new fabs.",
        1,
    ),
)

# ---------------------------------------------------------------------- claim checking

CLAIM_VERDICTS = ("entailment", "neutral", "contradiction")

CLAIMS_SYSTEM = """You check claims against a text. For each numbered claim, decide what the text says about it:
- "entailment": the text states the claim, or it follows directly from the text, figures included;
- "contradiction": the text states something that cannot be true together with the claim;
- "neutral": the text does not settle it either way.

Judge each claim on its own and only against the text, not against what you know. A claim whose figure, period or subject differs from the text's is not entailed.

Reply with JSON only: {"verdicts": [...]}, one of "entailment", "neutral", "contradiction" per claim, in the order of the claims."""

CLAIMS_USER = "Text:\n{premise}\n\nClaims:\n{listing}"

# (text, claims, verdicts)
CLAIMS_EXAMPLES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "Fabrikam Foods grew organic sales 4% in the quarter, with price increases contributing three points. "
        "The company raised its full-year dividend to $1.10 per share.",
        (
            "Higher prices added three points to Fabrikam's organic growth.",
            "Fabrikam plans to close a bakery in Ohio.",
            "Fabrikam cut its dividend.",
        ),
        ("entailment", "neutral", "contradiction"),
    ),
)


# ------------------------------------------------------------------------------ helpers


def listing(items: Sequence[str]) -> str:
    """``items`` numbered from 1, one a line: ``[1] ...``."""
    return "\n".join(LISTING_ITEM.format(number=number, text=item) for number, item in enumerate(items, start=1))


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


def _reply(**fields) -> str:
    return json.dumps(fields, ensure_ascii=False)


def check_summary_removal(mode: str) -> str:
    if mode not in SUMMARY_REMOVAL_MODES:
        raise ValueError(f"summary_removal must be one of {', '.join(SUMMARY_REMOVAL_MODES)}; got {mode!r}")
    return mode


# ----------------------------------------------------------------------------- requests


def summary_schema(n_units: int) -> dict:
    bound = {"type": "integer", "minimum": 0, "maximum": max(n_units - 1, 0)}
    return {"type": "object", "properties": {"opening": bound, "closing": bound}, "required": ["opening", "closing"]}


def summary_request(units: Sequence[str], max_tokens: int = SUMMARY_MAX_TOKENS) -> JudgeRequest:
    """How many leading and trailing ``units`` of an answer are introduction and conclusion."""
    examples = [
        (SUMMARY_USER.format(listing=listing(example_units)), _reply(opening=opening, closing=closing))
        for example_units, (opening, closing) in SUMMARY_EXAMPLES
    ]
    return chat_request(
        SUMMARY_SYSTEM,
        SUMMARY_USER.format(listing=listing(units)),
        examples,
        max_tokens=max_tokens,
        json_schema=summary_schema(len(units)),
    )


# An object around the list (the paper's output is a plain JSON list): OpenAI-compatible
# structured output requires an object at the top; the parser reads either form.
POINTS_SCHEMA = {
    "type": "object",
    "properties": {"points": {"type": "array", "items": {"type": "string"}}},
    "required": ["points"],
}


def extract_examples(summary_removal: str = "round") -> list[tuple[str, str]]:
    """The extraction examples as (user, assistant) turns: the example bodies alone after a
    summary-removal round, with their introductions and conclusions when folded."""
    check_summary_removal(summary_removal)
    turns = []
    for introduction, body, conclusion, points in EXTRACT_EXAMPLES:
        text = body if summary_removal == "round" else introduction + body + conclusion
        turns.append((EXTRACT_USER.format(text=text), _reply(points=list(points))))
    return turns


def extract_request(text: str, max_tokens: int | None = None, summary_removal: str = "round") -> JudgeRequest:
    """Turn ``text`` (an answer or a reference) into a JSON list of saliency points.

    ``max_tokens`` None gives the text its own budget (:func:`extract_budget`), so a long
    answer restated is not cut (a cut list does not parse). ``summary_removal="folded"`` asks
    the extractor to leave the introduction and conclusion out itself."""
    system = EXTRACT_SYSTEM if check_summary_removal(summary_removal) == "round" else EXTRACT_SYSTEM_FOLDED
    budget = extract_budget(text) if max_tokens is None else max_tokens
    return chat_request(
        system,
        EXTRACT_USER.format(text=text),
        extract_examples(summary_removal),
        max_tokens=budget,
        json_schema=POINTS_SCHEMA,
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
    examples = [
        (MATCH_USER.format(reference_point=reference, listing=listing(candidates)), _reply(match=match))
        for reference, candidates, match in MATCH_EXAMPLES
    ]
    return chat_request(
        MATCH_SYSTEM,
        MATCH_USER.format(reference_point=reference_point, listing=listing(answer_points)),
        examples,
        max_tokens=max_tokens,
        json_schema=match_schema(len(answer_points)),
    )


def score_schema(max_score: int) -> dict:
    return {
        "type": "object",
        "properties": {"score": {"type": "integer", "minimum": 0, "maximum": max_score}},
        "required": ["score"],
    }


def example_score(score: int, max_score: int) -> int:
    """An example's score on 0..``max_score``: the 0..10 score rescaled and rounded (half up).

    >>> [example_score(s, 5) for s in (7, 10, 5, 1)]
    [4, 5, 3, 1]
    """
    return math.floor(score * max_score / EXAMPLE_SCALE + 0.5)


def score_system(max_score: int) -> str:
    return SCORE_SYSTEM.format(max_score=max_score, below_max=max(max_score - 1, 1))


def score_request(
    reference_point: str, answer_point: str, max_score: int = 10, max_tokens: int = SCORE_MAX_TOKENS
) -> JudgeRequest:
    """Rate the similarity of a matched pair on 0..max_score."""
    examples = [
        (SCORE_USER.format(reference_point=reference, answer_point=answer), _reply(score=example_score(s, max_score)))
        for reference, answer, s in SCORE_EXAMPLES
    ]
    return chat_request(
        score_system(max_score),
        SCORE_USER.format(reference_point=reference_point, answer_point=answer_point),
        examples,
        max_tokens=max_tokens,
        json_schema=score_schema(max_score),
    )


def claims_schema(n_claims: int) -> dict:
    return {
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "array",
                "items": {"type": "string", "enum": list(CLAIM_VERDICTS)},
                "minItems": n_claims,
                "maxItems": n_claims,
            }
        },
        "required": ["verdicts"],
    }


def claims_request(premise: str, claims: Sequence[str]) -> JudgeRequest:
    """Check each of ``claims`` against ``premise``: entailment, neutral or contradiction."""
    examples = [
        (CLAIMS_USER.format(premise=text, listing=listing(example_claims)), _reply(verdicts=list(verdicts)))
        for text, example_claims, verdicts in CLAIMS_EXAMPLES
    ]
    return chat_request(
        CLAIMS_SYSTEM,
        CLAIMS_USER.format(premise=premise, listing=listing(claims)),
        examples,
        max_tokens=max(CLAIMS_MIN_TOKENS, CLAIMS_TOKENS_PER_CLAIM * len(claims)),
        json_schema=claims_schema(len(claims)),
    )


# Everything that shapes a request: system prompts, examples, user turns and output schemas.
PROMPT_PARTS = (
    SUMMARY_SYSTEM,
    SUMMARY_USER,
    SUMMARY_EXAMPLES,
    summary_schema(0),
    EXTRACT_SYSTEM,
    EXTRACT_SYSTEM_FOLDED,
    EXTRACT_USER,
    EXTRACT_EXAMPLES,
    POINTS_SCHEMA,
    MATCH_SYSTEM,
    MATCH_USER,
    MATCH_EXAMPLES,
    match_schema(0),
    SCORE_SYSTEM,
    SCORE_USER,
    SCORE_EXAMPLES,
    score_schema(0),
    CLAIMS_SYSTEM,
    CLAIMS_USER,
    CLAIMS_EXAMPLES,
    claims_schema(0),
    LISTING_ITEM,
)
EMS_PROMPTS_HASH = prompt_hash(*PROMPT_PARTS)
