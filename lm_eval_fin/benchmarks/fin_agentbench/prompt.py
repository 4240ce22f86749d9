"""The challenge's prompts: the model sees the challenge's own user message, and the question
and candidates are read back out of it (for the ranking parser's labels and for FinCARDS).

A prompt holds the question (``Question: ...``), the candidates as ``[<Something> Index N]
text`` blocks (document types, or a filing's chunks), and the instruction to answer with a
bracketed list of indices.

A chunk prompt can run to tens of thousands of tokens: :func:`fit_chunks` fits it to the
model's context with the harness's fitter, keeping the question and the closing instruction
and dropping chunks from the end of the list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lm_eval_fin.harness.fitting import PROMPT_MARGIN_TOKENS, PromptFitter

_CANDIDATE = re.compile(r"^\s*\[[^\[\]\n]*?Index\s+(\d+)\]\s*", re.MULTILINE | re.IGNORECASE)
_QUESTION = re.compile(r"Question:\s*(.+?)(?:\n\s*\n|\n(?=\S[^\n]*:\s*$)|$)", re.DOTALL)


def prompt_text(record: Mapping[str, Any]) -> str:
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


# ------------------------------------------------------------------------------- fitting

OMISSION_MARK = "[... {count} more chunks left out here to fit the model's context ...]"


@dataclass(frozen=True)
class ChallengePrompt:
    """A prompt cut at its candidate blocks: ``head`` (the question and what comes before the
    first block), the blocks in order (each with its ``[... Index N]`` marker) and ``tail``
    (the closing instruction). ``head + "".join(text for _, text in blocks) + tail`` is the
    prompt."""

    head: str
    blocks: tuple[tuple[int, str], ...]
    tail: str

    def with_first(self, count: int) -> str:
        """The prompt with its first ``count`` blocks; the others are named by a note."""
        if count >= len(self.blocks):
            return self.head + "".join(text for _, text in self.blocks) + self.tail
        kept = "".join(text for _, text in self.blocks[:count]).rstrip()
        note = OMISSION_MARK.format(count=len(self.blocks) - count)
        return f"{self.head}{kept}\n\n{note}{self.tail}" if kept else f"{self.head}{note}{self.tail}"


def split_challenge_prompt(text: str) -> ChallengePrompt:
    """The prompt's head, candidate blocks and tail (the blocks as :func:`parse_challenge_prompt`
    reads them: the last one ends at the first blank line after its marker)."""
    marks = list(_CANDIDATE.finditer(text))
    if not marks:
        return ChallengePrompt(text, (), "")
    last_body = text[marks[-1].end():]
    blank = re.search(r"\n\s*\n", last_body)
    end = marks[-1].end() + (blank.start() if blank else len(last_body))
    starts = [mark.start() for mark in marks]
    blocks = tuple(
        (int(mark.group(1)), text[start:stop]) for mark, start, stop in zip(marks, starts, [*starts[1:], end])
    )
    return ChallengePrompt(text[: starts[0]], blocks, text[end:])


@dataclass(frozen=True)
class FittedPrompt:
    text: str
    dropped: tuple[int, ...]  # indices of the chunks left out, in prompt order
    tokens: int  # tokens of the whole prompt as given (in the chat template, if any)


def fit_chunks(text: str, fitter: PromptFitter) -> FittedPrompt:
    """The prompt fitted to ``fitter``'s context: the question and the closing instruction kept
    whole, chunks dropped from the end of the list (and a note saying how many) until the
    prompt and the answer budget fit. Raises ValueError when even no chunk at all does."""
    tokens = fitter.prompt_tokens(text)
    limit = fitter.max_length - fitter.max_gen_toks - PROMPT_MARGIN_TOKENS
    if tokens <= limit:
        return FittedPrompt(text, (), tokens)
    prompt = split_challenge_prompt(text)
    room = fitter.room(prompt.with_first(0))
    if room < 0 or not prompt.blocks:
        raise ValueError(
            f"max_length {fitter.max_length} cannot hold the prompt without its chunks plus "
            f"{fitter.max_gen_toks} answer tokens; raise max_length or lower max_gen_toks"
        )
    kept, used = 0, 0
    for _, block in prompt.blocks:
        used += len(fitter.tokens(block))
        if used > room:
            break
        kept += 1
    # token counts of the parts need not add up to the whole's: check it, drop more if needed
    while kept and fitter.prompt_tokens(prompt.with_first(kept)) > limit:
        kept -= 1
    dropped = tuple(index for index, _ in prompt.blocks[kept:])
    return FittedPrompt(prompt.with_first(kept), dropped, tokens)
