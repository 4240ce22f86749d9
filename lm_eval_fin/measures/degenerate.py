"""Degenerate answers: text that scores without answering.

A model can earn points without doing the task: an echo of the prompt pairs its sentences with
reference points, and a ranking that lists the candidates in the order given earns nDCG. Such
answers are flagged per document (the tasks' ``degenerate_answer``, 1.0 where an answer is
one; its mean is the task's rate) and shown in the report, never silently scored as answers.

An answer is degenerate when it is

* ``empty``: no letter or digit;
* ``repetition``: at least :data:`MIN_WORDS` words, more than :data:`REPEAT_SHARE` of its word
  4-grams repeat an earlier one (a loop);
* ``echo``: at least :data:`ECHO_SHARE` of its word :data:`NGRAM`-grams occur in the prompt (an
  answer shorter than one n-gram: all of it occurs there), so it copies the prompt rather
  than answering (a quotation inside an answer of its own stays under the share);
* ``input order`` (rankings): it lists at least three candidates, all in the order the prompt
  gave them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

NGRAM = 8
ECHO_SHARE = 0.8
MIN_WORDS = 20
REPEAT_SHARE = 0.5
MIN_RANKED = 3
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def repeated_share(tokens: Sequence[str], n: int = 4) -> float:
    """The share of the n-grams that repeat an earlier one.

    >>> repeated_share("a b c d a b c d a b c d".split())
    0.6666666666666666
    """
    grams = _ngrams(tokens, n)
    return (len(grams) - len(set(grams))) / len(grams) if grams else 0.0


def echo_share(answer_tokens: Sequence[str], prompt_tokens: Sequence[str], n: int = NGRAM) -> float:
    """The share of the answer's word n-grams that occur in the prompt (an answer shorter than
    n words: 1.0 when its words occur in the prompt in that order, else 0.0)."""
    if not answer_tokens:
        return 0.0
    if len(answer_tokens) < n:
        return float(" ".join(answer_tokens) in " ".join(prompt_tokens))
    prompt_grams = set(_ngrams(prompt_tokens, n))
    grams = _ngrams(answer_tokens, n)
    return sum(gram in prompt_grams for gram in grams) / len(grams)


def degenerate_kind(answer: str, prompt: str) -> str | None:
    """Why ``answer`` is degenerate (``"empty"``, ``"repetition"``, ``"echo"``), or None.

    >>> degenerate_kind("  ...  ", "Question?"), degenerate_kind("Revenue rose 5%.", "What happened to revenue?")
    ('empty', None)
    >>> degenerate_kind("What happened to revenue?", "Transcript ... What happened to revenue?")
    'echo'
    """
    tokens = words(answer)
    if not tokens:
        return "empty"
    if len(tokens) >= MIN_WORDS and repeated_share(tokens) > REPEAT_SHARE:
        return "repetition"
    if echo_share(tokens, words(prompt)) >= ECHO_SHARE:
        return "echo"
    return None


def in_input_order(ranking: Sequence[int] | None, candidates: Sequence[int]) -> bool:
    """Whether a ranking lists at least :data:`MIN_RANKED` candidates, in the order given.

    >>> in_input_order([0, 1, 2, 3], [0, 1, 2, 3, 4]), in_input_order([0, 2, 1], [0, 1, 2]), in_input_order([0, 1], [0, 1])
    (True, False, False)
    """
    if not ranking or len(ranking) < MIN_RANKED:
        return False
    return list(ranking) == list(candidates)[: len(ranking)]
