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

A judge failure is never a score. A request the judge did not answer (transport, HTTP,
timeout, refusal) or answered unreadably after the re-asks leaves its document unjudged:

* extraction (of the reference or the answer) or matching: the document has no EMS at all
  (every scorer's P/R/F1 is None for it, NaN in the per-document details);
* scoring by the LLM: the document has no EMS(LLM); EMS(ROUGE) and EMS(BERTScore) of its
  pairs stand.

Corpus means run over the judged documents; ``judge_failure`` and ``judge_parse_failure`` are
the shares of documents with a failed request, and with an unreadable answer but no failed
request. The details keep, per document, the first error and the stages left unreadable.
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
        names += ["judge_failure", "judge_parse_failure", *(f"ems_judge_{name}" for name in USAGE_FIELDS)]
    return names


@dataclass
class DocumentEms:
    """Everything EMS decided for one answer/reference pair. ``ems[scorer]`` is None where
    the judge left the document unjudged for that scorer (see the module docstring)."""

    reference_points: list[str]
    answer_points: list[str]
    alignment: list[int]
    scores: dict[str, list[float | None] | None]  # scorer -> s_i per reference point; None: unavailable
    ems: dict[str, tuple[float, float, float] | None]  # scorer -> (P, R, F1)
    parse_failures: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))
    judge_error: str | None = None  # the first request of this document the judge failed

    @property
    def judge_failed(self) -> bool:
        return self.judge_error is not None

    @property
    def judge_unparsed(self) -> bool:
        return not self.judge_failed and any(self.parse_failures.values())

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
    unavailable: tuple[str, ...] = ()  # scorers that could not run at all (a BERTScore model that will not load)

    @property
    def judge_failures(self) -> int:
        return sum(doc.judge_failed for doc in self.documents)

    @property
    def judge_parse_failures(self) -> int:
        return sum(doc.judge_unparsed for doc in self.documents)

    def metrics(self) -> dict[str, float]:
        """Mean P/R/F1 per scorer over the documents it judged (NaN for a scorer that could
        not run, or with no judged document), and in judge runs the failure shares and the
        judge's usage."""
        values: dict[str, float] = {}
        for scorer in self.scorers:
            prefix = metric_prefix(self.method, scorer)
            judged = [doc.ems[scorer] for doc in self.documents if doc.ems[scorer] is not None]
            for position, part in enumerate(("precision", "recall", "f1")):
                if scorer in self.unavailable or not judged:
                    values[f"{prefix}_{part}"] = math.nan
                else:
                    values[f"{prefix}_{part}"] = sum(t[position] for t in judged) / len(judged)
        if self.method == LLM:
            n = len(self.documents)
            values["judge_failure"] = self.judge_failures / n if n else math.nan
            values["judge_parse_failure"] = self.judge_parse_failures / n if n else math.nan
            for name in USAGE_FIELDS:
                values[f"ems_judge_{name}"] = float(self.judge_usage.get(name, 0))
        return values

    def first_error(self) -> str | None:
        return next((doc.judge_error for doc in self.documents if doc.judge_error), None)

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
            "judge_failures": {
                "failed": self.judge_failures, "unparsed": self.judge_parse_failures, "first_error": self.first_error(),
            },
            "metrics": self.metrics(),
            "documents": [doc.as_dict() for doc in self.documents],
        }


def _judge_usage(judge: Any) -> dict[str, int] | None:
    stats = getattr(judge, "stats", None)
    if stats is None:
        return None
    return {name: int(getattr(stats, name, 0)) for name in USAGE_FIELDS}


# ------------------------------------------------------------------------------ stages


@dataclass
class Problem:
    """What went wrong with one request: the judge failed it (``error``), or its answer
    stayed unreadable (``error`` None)."""

    stage: str
    error: str | None = None


def _problem(stage: str, answer: Any) -> Problem | None:
    if answer.failed:
        return Problem(stage, answer.error)
    return Problem(stage) if answer.unparsed else None


def extract_all(
    texts: Sequence[str], judge: Any, max_tokens: int | None = None, max_attempts: int = MAX_ATTEMPTS
) -> tuple[list[list[str] | None], list[Problem | None]]:
    """Points of each text (None where the judge left it unextracted) and its problem.

    Distinct non-empty texts go to the judge once, in one batch; an empty text has no points.
    ``max_tokens`` None gives each text a budget scaled to its length
    (:func:`lm_eval_fin.ems.prompts.extract_budget`). Without a judge, the offline extractor.
    """
    distinct = list(dict.fromkeys(text for text in texts if text.strip()))
    if judge is None:
        by_text = {text: (offline.extract_points(text), None) for text in distinct}
    else:
        from lm_eval_fin.judge import complete_parsed_answers

        requests = [prompts.extract_request(text, max_tokens=max_tokens) for text in distinct]
        answers = complete_parsed_answers(judge, requests, parse_points, desc="EMS extract", max_attempts=max_attempts)
        by_text = {text: (answer.value, _problem("extraction", answer)) for text, answer in zip(distinct, answers)}
    results = [by_text.get(text, ([], None)) for text in texts]
    return [points for points, _ in results], [problem for _, problem in results]


def match_all(
    point_pairs: Sequence[tuple[list[str], list[str]]],
    judge: Any,
    threshold: float = offline.MATCH_THRESHOLD,
    max_attempts: int = MAX_ATTEMPTS,
) -> tuple[list[list[int]], list[list[Problem]]]:
    """Alignment of each (reference points, answer points) pair, and the problems of its
    requests. With a judge: one request per reference point, all in one batch."""
    if judge is None:
        return [offline.match_points(refs, answers, threshold) for refs, answers in point_pairs], [
            [] for _ in point_pairs
        ]
    from lm_eval_fin.judge import complete_parsed_answers

    requests, parsers, owners = [], [], []
    for doc, (refs, answers) in enumerate(point_pairs):
        if answers:  # nothing to match against: every reference point is unmatched
            for position, ref in enumerate(refs):
                requests.append(prompts.match_request(ref, answers))
                # an index off this answer's list is unreadable, so it is asked again
                parsers.append(functools.partial(parse_match, n_answer_points=len(answers)))
                owners.append((doc, position))
    answers = (
        complete_parsed_answers(judge, requests, parsers, desc="EMS match", max_attempts=max_attempts)
        if requests
        else []
    )
    alignments = [[NO_MATCH] * len(refs) for refs, _ in point_pairs]
    problems: list[list[Problem]] = [[] for _ in point_pairs]
    for (doc, position), answer in zip(owners, answers):
        problem = _problem("matching", answer)
        if problem is not None:
            problems[doc].append(problem)
        else:
            alignments[doc][position] = answer.value
    return alignments, problems


def score_pairs(
    scorer: str,
    pairs: Sequence[tuple[str, str]],
    judge: Any = None,
    max_score: int = 10,
    bertscore_model: str | None = None,
    max_attempts: int = MAX_ATTEMPTS,
) -> tuple[list[float | None] | None, list[Problem | None]]:
    """Scores in [0, 1] of (reference point, answer point) pairs (None for a pair the LLM left
    unscored) and each pair's problem; None for all when the scorer cannot run (a BERTScore
    model that will not load)."""
    from lm_eval_fin import textsim

    if not pairs:
        return [], []
    refs = [ref for ref, _ in pairs]
    answers = [answer for _, answer in pairs]
    if scorer == ROUGE:
        return [f1 for _, _, f1 in textsim.rouge_l(answers, refs)], [None] * len(pairs)
    if scorer == BERTSCORE:
        scores = textsim.bertscore_f1(answers, refs, model=bertscore_model)
        # BERTScore F1 can dip below 0 for unrelated texts; EMS needs s_i in [0, 1].
        return (None if scores is None else [min(1.0, max(0.0, s)) for s in scores]), [None] * len(pairs)
    if scorer == LLM:
        from lm_eval_fin.judge import complete_parsed_answers

        requests = [prompts.score_request(ref, answer, max_score=max_score) for ref, answer in pairs]
        parse = functools.partial(parse_score, max_score=max_score)
        parsed = complete_parsed_answers(judge, requests, parse, desc="EMS score", max_attempts=max_attempts)
        return [answer.value for answer in parsed], [_problem("scoring", answer) for answer in parsed]
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
    n = len(answers)
    doc_problems: list[list[Problem]] = [[] for _ in range(n)]

    started = time.perf_counter()
    points, extraction_problems = extract_all([*references, *answers], judge, extract_max_tokens, max_attempts)
    for doc in range(n):
        doc_problems[doc] += [p for p in (extraction_problems[doc], extraction_problems[n + doc]) if p]
    # a document with a text left unextracted is not matched or scored: no EMS for it
    extracted = [points[doc] is not None and points[n + doc] is not None for doc in range(n)]
    point_pairs = [(points[doc] or [], points[n + doc] or []) for doc in range(n)]
    seconds["extraction"] = time.perf_counter() - started

    started = time.perf_counter()
    to_match = [doc for doc in range(n) if extracted[doc]]
    matched, match_problems = match_all([point_pairs[doc] for doc in to_match], judge, match_threshold, max_attempts)
    alignments = [[NO_MATCH] * len(point_pairs[doc][0]) for doc in range(n)]
    for doc, alignment, problems in zip(to_match, matched, match_problems):
        alignments[doc] = alignment
        doc_problems[doc] += problems
    # a document with a match left unjudged has no alignment to score
    aligned = [extracted[doc] and not doc_problems[doc] for doc in range(n)]
    seconds["matching"] = time.perf_counter() - started

    # Every matched pair of the aligned documents, scored once per scorer in one batch.
    pair_owners = [
        (doc, i) for doc in range(n) if aligned[doc] for i, a in enumerate(alignments[doc]) if a != NO_MATCH
    ]
    pairs = [(point_pairs[doc][0][i], point_pairs[doc][1][alignments[doc][i]]) for doc, i in pair_owners]
    started = time.perf_counter()
    pair_scores: dict[str, list[float | None] | None] = {}
    for scorer in scorers:
        pair_scores[scorer], problems = score_pairs(scorer, pairs, judge, max_score, bertscore_model, max_attempts)
        for (doc, _), problem in zip(pair_owners, problems):
            if problem is not None:
                doc_problems[doc].append(problem)
    seconds["scoring"] = time.perf_counter() - started
    unavailable = tuple(scorer for scorer in scorers if pair_scores[scorer] is None)

    pairs_of: dict[int, list[tuple[int, int]]] = {}  # document -> (reference point, pair) of its pairs
    for pair, (doc, i) in enumerate(pair_owners):
        pairs_of.setdefault(doc, []).append((i, pair))
    documents = []
    for doc, ((refs, answer_points), alignment) in enumerate(zip(point_pairs, alignments)):
        scores: dict[str, list[float | None] | None] = {}
        ems: dict[str, tuple[float, float, float] | None] = {}
        for scorer in scorers:
            if pair_scores[scorer] is None:
                scores[scorer] = ems[scorer] = None
                continue
            per_point: list[float | None] = [0.0] * len(refs)  # s_i is 0 where unmatched
            for i, pair in pairs_of.get(doc, ()):
                per_point[i] = pair_scores[scorer][pair]
            scores[scorer] = per_point
            judged = aligned[doc] and all(value is not None for value in per_point)
            ems[scorer] = ems_scores(alignment, per_point, len(answer_points)) if judged else None
        failures = {stage: sum(p.stage == stage and p.error is None for p in doc_problems[doc]) for stage in STAGES}
        error = next((p.error for p in doc_problems[doc] if p.error is not None), None)
        documents.append(DocumentEms(refs, answer_points, alignment, scores, ems, failures, error))

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
        unavailable=unavailable,
    )
