"""The challenge's prompts: the model sees the challenge's own user message, and the question
and candidates are read back out of it (for the ranking parser's labels and for FinCARDS).

A prompt holds the question (``Question: ...``), the candidates as ``[<Something> Index N]
text`` blocks (document types, or a filing's chunks), and the instruction to answer with a
bracketed list of indices.
"""

from __future__ import annotations

import re

_CANDIDATE = re.compile(r"^\s*\[[^\[\]\n]*?Index\s+(\d+)\]\s*", re.MULTILINE | re.IGNORECASE)
_QUESTION = re.compile(r"Question:\s*(.+?)(?:\n\s*\n|\n(?=\S[^\n]*:\s*$)|$)", re.DOTALL)


def prompt_text(record: dict) -> str:
    """The prompt as the challenge gives it: the content of the (last) user message."""
    users = [m["content"] for m in record["messages"] if m.get("role", "user") == "user"]
    return users[-1] if users else record["messages"][-1]["content"]


def parse_challenge_prompt(text: str) -> tuple[str, dict[int, str]]:
    """(question, {candidate index: candidate text}) read from one challenge prompt.

    Candidates are the ``[... Index N] text`` blocks; each runs to the next block, and the last
    one to the first blank line followed by the closing instruction.
    """
    question_match = _QUESTION.search(text)
    question = question_match.group(1).strip() if question_match else ""
    marks = list(_CANDIDATE.finditer(text))
    candidates: dict[int, str] = {}
    for mark, following in zip(marks, [*marks[1:], None]):
        end = following.start() if following else len(text)
        body = text[mark.end() : end]
        if following is None:
            # The instruction after the last candidate is separated by a blank line.
            body = re.split(r"\n\s*\n", body, maxsplit=1)[0]
        candidates.setdefault(int(mark.group(1)), body.strip())
    return question, candidates


def candidates_of(record: dict) -> dict[int, str]:
    """Candidate index -> text of a record: from its prompt, else (no readable candidate
    blocks) the indices of its grades with no text."""
    _, candidates = parse_challenge_prompt(prompt_text(record))
    if candidates:
        return candidates
    return {int(k): "" for k in (record.get("qrel") or {}) if str(k).lstrip("-").isdigit()}
