"""The ``llm`` baseline of the paper's ablation table: one zero-shot listwise pass on raw text.

The judge sees the question and the raw text of every stage-1 candidate (in BM25 order, as
"[Chunk Index N] text" blocks) and names the k most relevant chunk indices, best first, the
way the challenge prompt asks for "the 10 most relevant". Each chunk is cut to the prompt's
character budget divided by the number of candidates, and never to more than the per-chunk
maximum: 150 chunks of 1,500 characters would be about 64,000 tokens, beyond the context
of most 7B judges. The default budget, 90,000 characters, is sized for a 32k-token context:
filing text runs at about 3.5 characters a token (figures and tables tokenise worse than
prose), so the chunks take some 26k tokens, leaving room for the chunk headers (about 6
tokens each), the instructions, the question and the answer. With 60 candidates each chunk
still gets the full 1,500 characters; with 150, 600. No cards, no intent, no tournament. The
candidates it does not name follow in BM25 order, so the output is a full ranking; an
unparsable answer leaves the BM25 order (and counts as a parse failure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lm_eval_fin.judge.base import JudgeRequest, chat_request

CHUNK_CHARS = 1500  # the most characters of one chunk the judge sees
PROMPT_CHARS = 90_000  # chunk characters of the whole prompt, sized for a 32k-token context

_INSTRUCTIONS = """You rank chunks of one company filing by how useful they are as evidence for answering a question. Read the question and the chunks; prefer chunks that state the metric, period, scope and figures the question asks about over general or boilerplate text.

Answer with a JSON object {"ranking": [<chunk indices, most relevant first>]}."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary, marked with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = head.rfind(" ")
    return (head[:cut] if cut > limit // 2 else head) + " …"


def chunk_chars(candidates: int, prompt_chars: int = PROMPT_CHARS, most: int = CHUNK_CHARS) -> int:
    """Characters shown per chunk: the prompt's budget shared by the candidates, at most
    ``most`` (and at least 1).

    >>> chunk_chars(60), chunk_chars(100), chunk_chars(150), chunk_chars(0)
    (1500, 900, 600, 1500)
    """
    if candidates <= 0:
        return most
    return max(1, min(most, prompt_chars // candidates))


def zeroshot_request(
    question: str,
    chunks: Mapping[int, str],
    candidates: Sequence[int],
    top: int,
    max_tokens: int,
    most_chars: int = CHUNK_CHARS,
    prompt_chars: int = PROMPT_CHARS,
) -> JudgeRequest:
    """The single listwise request of a query; each chunk is clipped to
    :func:`chunk_chars` of the candidate count."""
    top = min(top, len(candidates))
    limit = chunk_chars(len(candidates), prompt_chars, most_chars)
    blocks = "\n\n".join(f"[Chunk Index {i}] {clip(chunks[i], limit)}" for i in candidates)
    user = (
        f"Question: {question}\n\nChunks:\n{blocks}\n\n"
        f"List the {top} most relevant chunk indices, most relevant first, as JSON:"
    )
    return chat_request(
        _INSTRUCTIONS,
        user,
        max_tokens=max_tokens,
        temperature=0.0,
        json_schema={
            "title": "fincards_zeroshot",
            "type": "object",
            "properties": {
                "ranking": {"type": "array", "items": {"enum": sorted(candidates)}, "minItems": 1, "maxItems": top}
            },
            "required": ["ranking"],
        },
    )

