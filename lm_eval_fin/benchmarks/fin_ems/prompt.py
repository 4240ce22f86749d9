"""The fin_ems prompt: a transcript, then the question; and fitting it to the model's context.

The paper shows no prompt for the models it evaluates (it calls its setting "a naive
question-answer approach"); the one answer prompt it shows is its Figure 3, which wrote the
individual answers behind its references. The model under test gets Figure 3's instructions
(our words): understand the question, then answer clearly, completely, accurately and
concisely, without citations, and check the answer before finishing. The builder's answerers
(:mod:`lm_eval_fin.builders.earnings_call`) get a shorter wording of the same four qualities,
with a coverage instruction of its own and no final review: alike in the qualities asked
for, not word for word (tasks/fin_ems/README.md says so).

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

Answer the question that follows from the transcript. First make sure you understand everything it asks. Then write an answer that is:
- clear: easy to follow, with no term or concept left unclear;
- complete: it addresses every part of the question;
- accurate: every statement and figure is supported by the transcript;
- concise: no needless words or repetition, but no important detail left out.
Before you finish, read the answer again and check that it covers the whole question and is accurate and clear. Do not include citations.

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
