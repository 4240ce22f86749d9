"""An earnings-call dataset built the way the EMS paper built its own: transcripts, the
paper's five questions, and references consolidated from two answers.

What is the paper's and what is not. The paper's data was not published, so this is a
rebuild in its manner, not its dataset:

* the same: the five questions (its appendix A.1, ``ems_questions.json``); the ten companies
  it names, as tickers (``PAPER_COMPANIES``; Alphabet as ``GOOGL``, our choice of share class);
  the reference procedure (two answers written independently, consolidated with the transcript
  at hand, the consolidation prompt following its Figure 4);
* not the same: the transcripts come from the hub dataset ``kurry/sp500_earnings_transcripts``
  at a pinned revision (or from local files); the paper does not name its source, and two
  transcripts of one call differ in wording, speakers and cuts. The quarter: the paper speaks of
  "the third quarter of 2024", which can mean the calls on Q3 results (held October to
  December 2024, our default) or the calls held in Q3 (``--quarter_basis call-date``); it does
  not say which. The models: the paper's answerers are GPT-4o and Mistral Large and its
  consolidator GPT-4o; ours are whichever judges the build names. So figures on a built
  dataset are not comparable with the paper's Table 1 number for number.

The builder writes the fin_ems dataset format (records, files and fields:
:mod:`lm_eval_fin.benchmarks.fin_ems.data`); each record's ``provenance`` holds ``source``,
``answerer_a``, ``answerer_b``, ``consolidator``, ``answer_decoding``, ``answer_prompt_hash``,
``consolidate_prompt_hash`` (each covering the request's whole template), ``built_at`` and
``lm_eval_fin_version``.

Selecting calls. Companies name their quarters by fiscal year (Apple's fiscal Q4 2024 and
Microsoft's fiscal Q1 2025 were both reported in October 2024), so calls are selected by the
date they were held, never by the source's year/quarter labels. A calendar quarter selects
calls on one of two bases (``--quarter_basis``):

* ``results`` (the default): the calls that report that calendar quarter's results, i.e.
  the calls held in the calendar quarter after it. ``--quarter 2024Q3`` (the default)
  selects calls held 2024-10-01 to 2024-12-31.
* ``call-date``: the calls whose date falls in the quarter itself. ``--quarter 2024Q3``
  selects calls held 2024-07-01 to 2024-09-30 (which mostly report Q2 results).

References, the paper's way: two answerers answer each question on their own; a third call
(the consolidator) merges the two answers with the transcript at hand, keeping the best of
each, settling disagreements from the transcript, without repetition or padding and without
adding content neither answer has. Every stage is one batch through the judge layer (all
answers of answerer A for all transcripts, then all of B, then all consolidations), cached,
so an interrupted build resumes where it stopped.

The two answerers' requests differ by construction: answerer B asks with the judge's seed + 1
(:data:`ANSWERER_SEED_OFFSETS`), so the judge cache never hands B the answer A got for the
same prompt. When both answerers are one judge spec, both answers come from one model: the
build warns, and B samples at :data:`SAME_MODEL_TEMPERATURE` where the judge decodes greedily
(a greedy second answer would repeat the first). ``answer_decoding`` in the provenance
records each answerer's seed and temperature.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_fin.judge.base import chat_request, prompt_hash
from lm_eval_fin.plumbing.jsonl import read_jsonl
from lm_eval_fin.text.replies import answer_part

logger = logging.getLogger(__name__)

HUB_DATASET = "kurry/sp500_earnings_transcripts"
# A fixed revision of the hub dataset, so that a rebuild reads the same transcripts.
HUB_REVISION = "f3ded372da8d18dc6ad98955c4558e34b5fe6d45"


# The ten companies the paper names (the largest S&P 500 members when it was written), by ticker.
PAPER_COMPANIES = {
    "AAPL": "Apple Inc.",
    "NVDA": "NVIDIA Corporation",
    "MSFT": "Microsoft Corporation",
    "GOOGL": "Alphabet Inc.",
    "AMZN": "Amazon.com, Inc.",
    "META": "Meta Platforms, Inc.",
    "TSLA": "Tesla, Inc.",
    "AVGO": "Broadcom Inc.",
    "JPM": "JPMorgan Chase & Co.",
    "LLY": "Eli Lilly and Company",
}
PAPER_QUARTER = "2024Q3"
QUARTER_BASES = ("results", "call-date")
DEFAULT_QUARTER_BASIS = "results"  # our reading of the paper's "third quarter of 2024"; it does not say

# Answerer B asks with the judge's seed plus its offset, so its requests (and cache keys)
# differ from answerer A's even when one model serves both roles.
ANSWERER_SEED_OFFSETS = {"answerer_a": 0, "answerer_b": 1}
# Answerer B's temperature when it is the same judge spec as A and that judge decodes greedily.
SAME_MODEL_TEMPERATURE = 0.7

# Local transcript files: <TICKER>_<YYYY-MM-DD>.txt, the call date in the name ...
_DATED_NAME = re.compile(r"^(?P<ticker>[A-Za-z][A-Za-z.\-]{0,9})_(?P<date>\d{4}-\d{2}-\d{2})$")
# ... and names like AAPL_2024_Q4 that carry a fiscal label, which needs a sidecar for the date.
_FISCAL_NAME = re.compile(
    r"^(?P<ticker>[A-Za-z][A-Za-z.\-]{0,9})_(?:FY)?(?P<year>\d{4})_?Q(?P<q>[1-4])$", re.IGNORECASE
)


class BuildError(ValueError):
    """Input the builder cannot use, with what it expected."""


@dataclass(frozen=True)
class Transcript:
    ticker: str
    company: str
    call_date: dt.date
    text: str
    fiscal_period: str = ""
    source: str = ""


# ------------------------------------------------------------------------------ selection


def parse_quarter(text: str) -> tuple[int, int]:
    """``"2024Q3"`` (or ``2024-Q3``, ``Q3 2024``) -> (2024, 3)."""
    match = re.fullmatch(
        r"\s*(\d{4})\s*-?\s*Q([1-4])\s*|\s*Q([1-4])\s*-?\s*(\d{4})\s*", text or "", re.IGNORECASE
    )
    if not match:
        raise BuildError(f"bad quarter {text!r}: expected e.g. 2024Q3")
    if match.group(1):
        return int(match.group(1)), int(match.group(2))
    return int(match.group(4)), int(match.group(3))


def quarter_window(
    year: int, quarter: int, basis: str = DEFAULT_QUARTER_BASIS
) -> tuple[dt.date, dt.date]:
    """First and last call date selected for calendar quarter ``year``/``quarter``.

    ``basis="results"``: calls reporting that quarter, held in the next calendar quarter.
    ``basis="call-date"``: calls held in that quarter.

    >>> quarter_window(2024, 3)
    (datetime.date(2024, 10, 1), datetime.date(2024, 12, 31))
    >>> quarter_window(2024, 3, basis="call-date")
    (datetime.date(2024, 7, 1), datetime.date(2024, 9, 30))
    """
    if basis not in QUARTER_BASES:
        raise BuildError(f"quarter basis must be one of {', '.join(QUARTER_BASES)}; got {basis!r}")
    if basis == "results":
        year, quarter = (year + 1, 1) if quarter == 4 else (year, quarter + 1)
    first = dt.date(year, 3 * quarter - 2, 1)
    next_first = dt.date(year + 1, 1, 1) if quarter == 4 else dt.date(year, 3 * quarter + 1, 1)
    return first, next_first - dt.timedelta(days=1)


def select_transcripts(
    transcripts: Iterable[Transcript], tickers: Sequence[str], window: tuple[dt.date, dt.date]
) -> list[Transcript]:
    """The calls of ``tickers`` held within ``window``: the earliest per ticker (a second
    call in the window is reported and left out), in the order of ``tickers``."""
    wanted = [t.upper() for t in tickers]
    first, last = window
    chosen: dict[str, Transcript] = {}
    for transcript in transcripts:
        if transcript.ticker not in wanted or not first <= transcript.call_date <= last:
            continue
        kept = chosen.get(transcript.ticker)
        if kept is None or transcript.call_date < kept.call_date:
            if kept is not None:
                logger.warning(
                    "%s: two calls in the window; keeping %s, leaving out %s",
                    transcript.ticker,
                    transcript.call_date,
                    kept.call_date,
                )
            chosen[transcript.ticker] = transcript
        else:
            logger.warning(
                "%s: two calls in the window; keeping %s, leaving out %s",
                transcript.ticker,
                kept.call_date,
                transcript.call_date,
            )
    missing = [t for t in wanted if t not in chosen]
    if missing:
        logger.warning("no call in %s..%s for: %s", first, last, ", ".join(missing))
    return [chosen[t] for t in wanted if t in chosen]


# --------------------------------------------------------------------------------- sources


def parse_call_date(value: Any) -> dt.date:
    """A call date from a date, a datetime or a string starting with YYYY-MM-DD."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    match = re.match(r"\s*(\d{4}-\d{2}-\d{2})", str(value or ""))
    if not match:
        raise BuildError(f"bad call date {value!r}: expected YYYY-MM-DD")
    try:
        return dt.date.fromisoformat(match.group(1))
    except ValueError as exc:
        raise BuildError(f"bad call date {value!r}: {exc}") from None


def _first(record: dict, *keys: str) -> Any:
    for key in keys:
        if record.get(key) not in (None, ""):
            return record[key]
    return None


def transcript_from_record(record: dict, source: str) -> Transcript:
    """A transcript from a hub-style record (``symbol``, ``date``, ``content``, optional
    ``company_name``, fiscal ``year``/``quarter``); ``ticker``/``call_date``/``transcript``/
    ``company`` are accepted too."""
    ticker = _first(record, "symbol", "ticker")
    text = _first(record, "content", "transcript", "text")
    date = _first(record, "date", "call_date")
    if not ticker or not isinstance(text, str) or date is None:
        raise BuildError(
            f"{source}: a transcript record needs a ticker ('symbol'), the call date ('date', "
            f"YYYY-MM-DD) and the text ('content'); got keys {sorted(record)}"
        )
    ticker = str(ticker).upper().strip()
    year, quarter = record.get("year"), record.get("quarter")
    fiscal = f"FY{int(str(year))} Q{int(str(quarter))}" if str(year).isdigit() and str(quarter).isdigit() else ""
    company = _first(record, "company_name", "company") or PAPER_COMPANIES.get(ticker, ticker)
    return Transcript(ticker, str(company), parse_call_date(date), text, fiscal, source)


def hub_transcripts(tickers: Sequence[str], revision: str = HUB_REVISION) -> Iterable[Transcript]:
    """Transcripts of ``tickers`` from the hub dataset, streamed (the full dataset is large)."""
    import datasets

    wanted = {t.upper() for t in tickers}
    stream = datasets.load_dataset(HUB_DATASET, split="train", revision=revision, streaming=True)
    source = f"hf://datasets/{HUB_DATASET}@{revision}"
    for record in stream:
        if str(record.get("symbol", "")).upper() in wanted:
            yield transcript_from_record(record, source)


def _sidecar(path: Path) -> dict:
    sidecar = path.with_suffix(".json")
    if not sidecar.is_file():
        return {}
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BuildError(f"{sidecar}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BuildError(f'{sidecar}: expected a JSON object such as {{"call_date": "2024-10-31"}}')
    return data


def text_file_transcript(path: Path) -> Transcript:
    """A ``.txt`` transcript. The ticker and call date come from a sidecar ``<name>.json``
    (``ticker``, ``call_date``, optional ``company``, ``fiscal_period``) or from the file
    name ``<TICKER>_<YYYY-MM-DD>.txt``. A name with a fiscal label (``AAPL_2024_Q4.txt``)
    does not say when the call was held, so it needs a sidecar with the date."""
    meta = _sidecar(path)
    dated = _DATED_NAME.match(path.stem)
    fiscal = _FISCAL_NAME.match(path.stem)
    named = dated or fiscal
    ticker = meta.get("ticker") or (named.group("ticker") if named else None)
    date = meta.get("call_date") or (dated.group("date") if dated else None)
    if not ticker or not date:
        hint = (
            f"its name looks like a fiscal label (FY{fiscal.group('year')} Q{fiscal.group('q')}), which is not "
            "the calendar quarter of the call"
            if fiscal
            else "its name does not follow <TICKER>_<YYYY-MM-DD>.txt"
        )
        raise BuildError(
            f"{path}: cannot tell the ticker and call date: {hint}. Rename it to "
            f"<TICKER>_<YYYY-MM-DD>.txt or add {path.with_suffix('.json').name} with "
            '{"ticker": "...", "call_date": "YYYY-MM-DD"}'
        )
    ticker = str(ticker).upper()
    fiscal_period = meta.get("fiscal_period") or (
        f"FY{fiscal.group('year')} Q{fiscal.group('q')}" if fiscal else ""
    )
    company = meta.get("company") or PAPER_COMPANIES.get(ticker, ticker)
    text = path.read_text(encoding="utf-8", errors="replace")
    return Transcript(ticker, str(company), parse_call_date(date), text, str(fiscal_period), str(path))


def local_transcripts(folder: str | Path) -> list[Transcript]:
    """Transcripts of a folder: ``*.txt`` files (see :func:`text_file_transcript`) and
    ``*.jsonl`` files of hub-style records (see :func:`transcript_from_record`)."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise BuildError(f"transcript folder {str(root)!r} does not exist")
    transcripts = [text_file_transcript(path) for path in sorted(root.glob("*.txt"))]
    for path in sorted(root.glob("*.jsonl")):
        for where, record in read_jsonl(path, BuildError):
            if not isinstance(record, dict):
                raise BuildError(f"{where}: expected a JSON object")
            transcripts.append(transcript_from_record(record, where))
    if not transcripts:
        raise BuildError(f"{root} holds no .txt or .jsonl transcripts")
    return transcripts


# ------------------------------------------------------------------------------ questions


def load_questions(path: str | Path | None = None) -> list[dict[str, str]]:
    """The questions (``id``, ``question``): the paper's five by default."""
    if path is None:
        from lm_eval_fin.plumbing import paths

        path = paths.data_path("ems_questions.json")
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    questions = data.get("questions") if isinstance(data, dict) else data
    if not isinstance(questions, list) or not all(
        isinstance(q, dict) and isinstance(q.get("id"), str) and isinstance(q.get("question"), str)
        for q in questions
    ):
        raise BuildError(f'{path}: expected {{"questions": [{{"id": ..., "question": ...}}, ...]}}')
    return questions


# -------------------------------------------------------------------------------- prompts

ANSWER_SYSTEM = """You are a financial analyst. You answer questions about a company's earnings call using only its transcript.

Write an answer that is clear, complete, accurate and concise: cover everything in the transcript that bears on the question, keep the figures exact, and say nothing the transcript does not support. Do not cite or quote line references."""

CONSOLIDATE_SYSTEM = """You are a financial analyst preparing the reference answer to a question about a company's earnings call.

You are given the transcript, the question and two answers written independently. Merge them into one answer:
1. Read the question and make sure you know everything it asks.
2. Compare the two answers: what each does well (clarity, completeness, accuracy, concision), where they overlap, what only one of them covers, and where they disagree.
3. Combine the best of both into one well-organised answer that addresses every part of the question. Where the answers disagree, settle it with the transcript and keep only what the transcript supports.
4. Check the result: accurate and clear, with no statement repeated and no needless wording, yet every essential detail and exact figure kept. Take the content from the two answers: the transcript settles disagreements, it is not a source of new points. Do not cite or refer to the transcript or the answers.

Reply with the combined answer only."""


# The user turns; the provenance hashes cover these with the system prompts.
CALL_HEADER = "Earnings call of {company} ({ticker}), held on {call_date}."
ANSWER_USER = "{header}\n\nTranscript:\n{transcript}\n\nQuestion: {question}"
CONSOLIDATE_USER = (
    "{header}\n\nTranscript:\n{transcript}\n\nQuestion: {question}\n\n"
    "Answer 1:\n{answer_a}\n\nAnswer 2:\n{answer_b}"
)
NO_ANSWER = "(no answer)"


def prompt_hashes() -> dict[str, str]:
    """Hashes of the whole request templates (system prompt, call header, user turn) of the
    answer and the consolidation requests, recorded in the provenance."""
    return {
        "answer_prompt_hash": prompt_hash(ANSWER_SYSTEM, CALL_HEADER, ANSWER_USER),
        "consolidate_prompt_hash": prompt_hash(CONSOLIDATE_SYSTEM, CALL_HEADER, CONSOLIDATE_USER, NO_ANSWER),
    }


def _call_header(transcript: Transcript) -> str:
    return CALL_HEADER.format(
        company=transcript.company, ticker=transcript.ticker, call_date=transcript.call_date.isoformat()
    )


def answer_request(
    transcript: Transcript, question: str, seed: int | None = None, temperature: float | None = None
):
    """One answerer's request; ``seed``/``temperature`` None take the judge's options."""
    content = ANSWER_USER.format(header=_call_header(transcript), transcript=transcript.text, question=question)
    return chat_request(ANSWER_SYSTEM, content, seed=seed, temperature=temperature)


def consolidate_request(transcript: Transcript, question: str, answer_a: str | None, answer_b: str | None):
    content = CONSOLIDATE_USER.format(
        header=_call_header(transcript),
        transcript=transcript.text,
        question=question,
        answer_a=answer_a or NO_ANSWER,
        answer_b=answer_b or NO_ANSWER,
    )
    return chat_request(CONSOLIDATE_SYSTEM, content)


def answer_decoding(answerer_a, answerer_b) -> dict[str, dict[str, Any]]:
    """Seed and temperature of each answerer's requests (see the module docstring); a value
    None is the judge's own option."""
    same_model = answerer_a is answerer_b or answerer_a.spec == answerer_b.spec
    decoding = {}
    for role, judge in (("answerer_a", answerer_a), ("answerer_b", answerer_b)):
        options = getattr(judge, "options", None)
        seed = int(getattr(options, "seed", 0) or 0) + ANSWERER_SEED_OFFSETS[role]
        temperature = None
        if role == "answerer_b" and same_model and not getattr(options, "temperature", 0):
            temperature = SAME_MODEL_TEMPERATURE
        decoding[role] = {"seed": seed, "temperature": temperature}
    if same_model:
        logger.warning(
            "answerers A and B are one judge (%s): both answers come from one model, so the "
            "references are one model's two answers consolidated, not two models' as in the paper; "
            "answerer B asks with seed %d%s. Pass --answerer_b with another model to follow the paper",
            answerer_a.spec,
            decoding["answerer_b"]["seed"],
            f" at temperature {decoding['answerer_b']['temperature']}"
            if decoding["answerer_b"]["temperature"] is not None
            else "",
        )
    return decoding


def parse_answer(text: str | None) -> str | None:
    """A free-text answer: its answer part (:func:`lm_eval_fin.text.replies.answer_part`; a reasoning
    model's thinking is no part of a reference), stripped; None when empty or cut off while
    thinking (the judge layer re-asks)."""
    if not isinstance(text, str):
        return None
    text = answer_part(text).strip()
    return text or None


# ---------------------------------------------------------------------------------- build


@dataclass
class BuildReport:
    records: list[dict]
    transcripts: int
    skipped: list[str]  # ids left out because no reference could be made
    seconds: dict[str, float]


def build_records(
    transcripts: Sequence[Transcript],
    questions: Sequence[dict[str, str]],
    answerer_a,
    answerer_b,
    consolidator,
    source: str,
) -> BuildReport:
    """References for every (transcript, question) pair, in three batched stages."""
    import time

    from lm_eval_fin import __version__
    from lm_eval_fin.judge import complete_parsed

    pairs = [(t, q) for t in transcripts for q in questions]
    decoding = answer_decoding(answerer_a, answerer_b)
    seconds, answers = {}, {}
    for role, answerer, label in (("answerer_a", answerer_a, "A"), ("answerer_b", answerer_b, "B")):
        started = time.perf_counter()
        answers[role] = complete_parsed(
            answerer,
            [answer_request(t, q["question"], **decoding[role]) for t, q in pairs],
            parse_answer,
            desc=f"references: answerer {label}",
        )
        seconds[role] = time.perf_counter() - started
    answers_a, answers_b = answers["answerer_a"], answers["answerer_b"]

    # A pair where both answerers failed has nothing to consolidate.
    to_merge = [i for i, (a, b) in enumerate(zip(answers_a, answers_b)) if a or b]
    started = time.perf_counter()
    merged = (
        complete_parsed(
            consolidator,
            [
                consolidate_request(pairs[i][0], pairs[i][1]["question"], answers_a[i], answers_b[i])
                for i in to_merge
            ],
            parse_answer,
            desc="references: consolidation",
        )
        if to_merge
        else []
    )
    seconds["consolidation"] = time.perf_counter() - started
    references = dict(zip(to_merge, merged))

    provenance = {
        "source": source,
        "answerer_a": answerer_a.spec,
        "answerer_b": answerer_b.spec,
        "consolidator": consolidator.spec,
        "answer_decoding": decoding,
        **prompt_hashes(),
        "built_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "lm_eval_fin_version": __version__,
    }
    records, skipped = [], []
    for index, (transcript, question) in enumerate(pairs):
        record_id = f"{transcript.ticker}-{transcript.call_date.isoformat()}-{question['id']}"
        reference = references.get(index)
        if reference is None:
            skipped.append(record_id)
            continue
        records.append(
            {
                "id": record_id,
                "company": transcript.company,
                "ticker": transcript.ticker,
                "call_date": transcript.call_date.isoformat(),
                "fiscal_period": transcript.fiscal_period,
                "question_id": question["id"],
                "question": question["question"],
                "transcript": transcript.text,
                "reference": reference,
                "provenance": dict(provenance, source=transcript.source or source),
            }
        )
    if skipped:
        logger.warning(
            "no reference for %d of %d records (judge failures): %s",
            len(skipped),
            len(pairs),
            ", ".join(skipped),
        )
    return BuildReport(records, len(transcripts), skipped, seconds)


def transcripts_from_source(
    source: str, tickers: Sequence[str], revision: str = HUB_REVISION
) -> tuple[Iterable[Transcript], str]:
    """Transcripts and a provenance label: ``"hub"`` for the hub dataset, else a folder."""
    if source == "hub":
        return hub_transcripts(tickers, revision), f"hf://datasets/{HUB_DATASET}@{revision}"
    return local_transcripts(source), str(Path(source).expanduser().resolve())
