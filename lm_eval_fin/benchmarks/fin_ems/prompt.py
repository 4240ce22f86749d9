"""The fin_ems prompt: a transcript, then the question; and fitting it to the model's context.

Transcripts run to 20k tokens, more than many models' context. The transcript, and only the
transcript, is cut so that the whole prompt plus the answer budget fits (see
:mod:`lm_eval_fin.harness.fitting`); the question comes after it and is never cut. The
beginning (the prepared remarks) is kept and :data:`TRUNCATION_MARK` says where it was cut.
"""

from __future__ import annotations

from lm_eval_fin.harness.fitting import PromptFitter

TRUNCATION_MARK = "\n[... transcript cut here to fit the model's context ...]"

PROMPT = """Below is the transcript of an earnings call of {company} ({ticker}), held on {call_date}.

Transcript:
{transcript}

Using the transcript, answer the question that follows. Write a detailed, well-organised answer: cover all the relevant points, keep the exact figures, and state nothing the transcript does not support.

Question: {question}"""


def render_prompt(doc: dict, transcript: str | None = None) -> str:
    return PROMPT.format(
        company=doc.get("company") or doc.get("ticker") or "the company",
        ticker=doc.get("ticker") or "n/a",
        call_date=doc.get("call_date") or "an unknown date",
        transcript=doc["transcript"] if transcript is None else transcript,
        question=doc["question"],
    )


def fit_transcript(doc: dict, fitter: PromptFitter) -> tuple[str, bool, int]:
    """(transcript to use, whether it was cut, its length in tokens before cutting)."""
    tokens = len(fitter.tokens(doc["transcript"]))
    budget = fitter.room(render_prompt(doc, transcript=TRUNCATION_MARK))
    if budget < 1:
        raise ValueError(
            f"fin_ems: max_length {fitter.max_length} cannot hold the prompt of {doc['id']} without its "
            f"transcript plus {fitter.max_gen_toks} answer tokens; raise max_length or lower max_gen_toks"
        )
    if tokens <= budget:
        return doc["transcript"], False, tokens
    return fitter.head(doc["transcript"], budget) + TRUNCATION_MARK, True, tokens
