"""The ``llm`` baseline of the paper's ablation table: one zero-shot listwise pass on raw text.

The judge sees the question and the raw text of every stage-1 candidate (in BM25 order, as
"[Chunk Index N] text" blocks, each cut to a character budget so a 150-chunk prompt stays
within a judge's context) and names the k most relevant chunk indices, best first, the way
the challenge prompt asks for "the 10 most relevant". No cards, no intent, no tournament. The
candidates it does not name follow in BM25 order, so the output is a full ranking; an
unparsable answer leaves the BM25 order (and counts as a parse failure).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from lm_eval_fin.judge.base import JudgeRequest
CHUNK_CHARS = 1500

_INSTRUCTIONS = """You rank chunks of one company filing by how useful they are as evidence for answering a question. Read the question and the chunks; prefer chunks that state the metric, period, scope and figures the question asks about over general or boilerplate text.

Answer with a JSON object {"ranking": [<chunk indices, most relevant first>]}."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary, marked with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = head.rfind(" ")
    return (head[:cut] if cut > limit // 2 else head) + " …"


def zeroshot_request(
    question: str,
    chunks: Mapping[int, str],
    candidates: Sequence[int],
    top: int,
    max_tokens: int,
    chunk_chars: int = CHUNK_CHARS,
) -> JudgeRequest:
    top = min(top, len(candidates))
    blocks = "\n\n".join(f"[Chunk Index {i}] {clip(chunks[i], chunk_chars)}" for i in candidates)
    user = (
        f"Question: {question}\n\nChunks:\n{blocks}\n\n"
        f"List the {top} most relevant chunk indices, most relevant first, as JSON:"
    )
    return JudgeRequest(
        messages=({"role": "system", "content": _INSTRUCTIONS}, {"role": "user", "content": user}),
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

