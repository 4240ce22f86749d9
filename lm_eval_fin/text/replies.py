"""What in a judge's reply is its verdict: the answer part, and the numbers in it that are values.

A judge may think aloud before it answers (``<think>...</think>``), restate the scale it was
given ("accuracy: 1-5", "an integer from 0 to 10", ``{"score": <0-10>}``) or refuse in words
that hold numbers. None of that is a verdict, and a parser that reads it as one turns a
non-answer into a score. Every judge parser reads :func:`answer_part` only, and takes a
number as a value only when :func:`is_scale` says it is not one end of a range.
"""

from __future__ import annotations

import re

from lm_eval_fin.text.cleantext import as_text

# A reasoning block closed by its tag; what is before the last closing tag is thinking (some
# chat templates open the block in the prompt, so the reply holds only the closing tag).
_CLOSING = re.compile(r"</(?:think|thinking|reasoning)>", re.IGNORECASE)
_OPENING = re.compile(r"<(?:think|thinking|reasoning)>", re.IGNORECASE)
# After a number: an optional parenthesis ("1 (worst)") and the other end of a range.
_RANGE_AFTER = re.compile(r"\s*(?:\([^()\n]{0,40}\)\s*)?(?:-|–|—|to\b|\.\.\.?|through\b)\s*[-−]?\d", re.IGNORECASE)
# Before a number: a placeholder's bracket ("<1-5>"), the opening of a range ("between 0 and
# 10", "from 1") or its other end ("1-5", "0 to 10", "0 and 10").
_RANGE_BEFORE = re.compile(r"(?:<|\bbetween|\bfrom|\d\s*(?:-|–|—|to|\.\.\.?|through|and))\s*$", re.IGNORECASE)


def answer_part(text: str) -> str:
    """``text`` after its reasoning: what follows the last closing reasoning tag, else what
    precedes an opening tag that was never closed (a reply cut off while thinking has no
    answer).

    >>> answer_part('<think>accuracy: 2?</think>{"accuracy": 4}')
    '{"accuracy": 4}'
    >>> answer_part("<think>accuracy: 4, numerical")
    ''
    """
    closings = list(_CLOSING.finditer(text))
    if closings:
        return text[closings[-1].end():]
    opening = _OPENING.search(text)
    return text[: opening.start()] if opening else text


def is_scale(text: str, start: int, end: int) -> bool:
    """Whether the number at ``text[start:end]`` is one end of a range or a placeholder
    ("1-5", "1 (worst) to 5", "between 0 and 10", "<1-5>"): the rubric restated, not a value.

    >>> is_scale("accuracy: 1-5", 10, 11), is_scale("accuracy: 4", 10, 11)
    (True, False)
    >>> is_scale("an integer between 0 and 10", 19, 20)
    True
    """
    return bool(_RANGE_AFTER.match(text, end)) or bool(_RANGE_BEFORE.search(text[max(0, start - 24):start]))


def reply_answer(reply: object) -> str:
    """The answer part of a reply of any type (bytes decoded, None empty).

    >>> reply_answer(b"<think>maybe [2]</think>[1, 3]")
    '[1, 3]'
    """
    return answer_part(as_text(reply))
