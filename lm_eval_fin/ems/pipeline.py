"""The EMS pass over a whole run: remove summaries, extract, match (and check claims), score.

With a judge, the pass sends at most four batched rounds through the judge layer (plus
re-asks of unreadable answers, see :func:`lm_eval_fin.judge.complete_parsed_answers`):

1. summary removal (``summary_removal="round"``, the default, as the paper does it): for
   every distinct text of the run, references and answers together, how many leading units
   only introduce it and how many trailing units only sum it up; the body between them is
   what is extracted. With ``"folded"`` there is no such round and the extraction prompt
   tells the judge to leave the summaries out itself (three rounds in all);
2. extraction: the saliency points of every distinct body. A reference's requests depend
   only on its text, so a second model evaluated on the same references finds them in the
   judge cache and costs no model call;
3. matching and claim checking, in one batch: every reference point against its answer's
   numbered point list; and, for the RAGChecker-style metrics, the answer's points checked
   against the whole reference text and the reference's points against the whole answer
   text (:data:`lm_eval_fin.ems.prompts.CLAIMS_PER_REQUEST` claims a request);
4. scoring: every matched pair, by the LLM (0..max_score / max_score).

The extraction and matching feed every scorer (LLM, ROUGE-L F1, BERTScore F1), so one run
reports EMS(LLM), EMS(ROUGE) and EMS(BERTScore) side by side, as the paper's Table 1, and the
same extraction gives the claims of ``ragchecker_precision`` / ``_recall`` / ``_f1``
(:mod:`lm_eval_fin.ems.claims`). The claims are the EMS points; RAGChecker's own extractor
(RefChecker) writes finer claims, with the question at hand, from the whole text, summaries
included, where EMS points leave the summaries out and keep repeated points (each distinct
point is checked once and counts as often as it occurs).

Without a judge the offline extractor and matcher of :mod:`lm_eval_fin.ems.offline` run and
the metrics say so in their names (``ems_offline_rouge_f1``); there is no LLM scorer and no
claim checking then.

A judge failure is never a score. A request the judge did not answer (transport, HTTP,
timeout, refusal) or answered unreadably after the re-asks leaves its document unjudged:

* summary removal or extraction (of the reference or the answer): the document has no EMS
  and no RAGChecker figures (None, NaN in the per-document details);
* matching: no EMS; claim checking: no RAGChecker figures (each stands without the other);
* scoring by the LLM: no EMS(LLM); EMS(ROUGE) and EMS(BERTScore) of its pairs stand.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lm_eval_fin.ems import claims, offline, prompts, summary
from lm_eval_fin.ems.formulas import NO_MATCH, ems_scores
from lm_eval_fin.ems.ledger import STAGES, Ledger, Problem, problem_of
from lm_eval_fin.ems.parsing import parse_match, parse_points, parse_score, parse_summary_bounds, parse_verdicts

logger = logging.getLogger(__name__)

LLM, ROUGE, BERTSCORE = "llm", "rouge", "bertscore"
SCORERS = (LLM, ROUGE, BERTSCORE)
OFFLINE = "offline"  # the method without a judge (LLM is the method with one)
PARTS = ("precision", "recall", "f1")
RAGCHECKER = "ragchecker"
DEFAULT_SUMMARY_REMOVAL = "round"
MAX_ATTEMPTS = 3  # asks per judge request (the first and two re-asks of unreadable answers)
USAGE_FIELDS = ("requests", "cache_hits", "model_calls", "prompt_tokens", "completion_tokens")
# the stages a figure needs answered: EMS of every scorer, RAGChecker; EMS(LLM) also needs scoring
EMS_NEEDS = ("summary", "extraction", "matching")
RAGCHECKER_NEEDS = ("summary", "extraction", "claims")


def metric_prefix(method: str, scorer: str) -> str:
    """``ems_<scorer>`` for the judge's extraction and matching (the paper's EMS(LLM),
    EMS(ROUGE), EMS(BERTScore)); ``ems_offline_<scorer>`` for the offline ones."""
    return f"ems_{scorer}" if method == LLM else f"ems_{OFFLINE}_{scorer}"


def metric_names(method: str, scorers: Sequence[str], ragchecker: bool = True) -> list[str]:
    """The metric names a run reports, in order (RAGChecker's only with a judge)."""
    names = [f"{metric_prefix(method, s)}_{part}" for s in scorers for part in PARTS]
    if method == LLM:
        if ragchecker:
            names += [f"{RAGCHECKER}_{part}" for part in PARTS]
        names += [
            "judge_failure", "judge_parse_failure", "ems_judge_rounds", *(f"ems_judge_{name}" for name in USAGE_FIELDS)
        ]
    return names


@dataclass
class DocumentEms:
    """Everything the pass decided for one answer/reference pair. ``ems[scorer]`` and
    ``ragchecker`` are None where the judge left the document unjudged for them (see the
    module docstring). ``verdicts``: the verdicts of the answer's claims against the
    reference (``"answer"``) and of the reference's claims against the answer
    (``"reference"``), one per point. ``summaries``: (opening, closing) units removed from
    each text by the summary round."""

    reference_points: list[str]
    answer_points: list[str]
    alignment: list[int]
    scores: dict[str, list[float | None] | None]  # scorer -> s_i per reference point; None: unavailable
    ems: dict[str, tuple[float, float, float] | None]  # scorer -> (P, R, F1)
    ragchecker: tuple[float, float, float] | None = None
    verdicts: dict[str, list[str] | None] = field(default_factory=lambda: {"answer": None, "reference": None})
    summaries: dict[str, tuple[int, int] | None] | None = None
    parse_failures: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))
    judge_error: str | None = None  # the first request of this document the judge failed
    # the judge work of this document (RequestUsage's fields); a request for a text several
    # documents share is counted at the first of them, so the documents sum to the run's work
    judge_usage: dict[str, int] | None = None

    @property
    def judge_failed(self) -> bool:
        return self.judge_error is not None

    @property
    def judge_unparsed(self) -> bool:
        return not self.judge_failed and any(self.parse_failures.values())

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class JudgeRound:
    """One batched round of the pass: its name, the requests of its first batch and how many
    of them were asked again because their answer did not parse."""

    name: str
    requests: int
    reasked: int = 0


@dataclass
class EmsRun:
    """The result of :func:`run_ems`: per-document details and the run's figures."""

    method: str
    scorers: tuple[str, ...]
    documents: list[DocumentEms]
    judge: str | None = None
    bertscore_model: str | None = None
    max_score: int = 10
    summary_removal: str | None = None  # "round" or "folded" with a judge
    ragchecker: bool = False
    rounds: list[JudgeRound] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    unavailable: tuple[str, ...] = ()  # scorers that could not run at all (a BERTScore model that will not load)

    @property
    def judge_usage(self) -> dict[str, int]:
        """The pass's judge work: its documents' (each request counted once) summed, and the
        requests the model did not answer (``cache_hits``); empty without a judge."""
        counted = [doc.judge_usage for doc in self.documents if doc.judge_usage is not None]
        if not counted:
            return {}
        total = {name: sum(usage[name] for usage in counted) for name in USAGE_FIELDS if name != "cache_hits"}
        return {**total, "cache_hits": total["requests"] - total["model_calls"]}

    @property
    def judge_failures(self) -> int:
        return sum(doc.judge_failed for doc in self.documents)

    @property
    def judge_parse_failures(self) -> int:
        return sum(doc.judge_unparsed for doc in self.documents)

    def metrics(self) -> dict[str, float]:
        """Mean P/R/F1 per scorer (and RAGChecker's) over the documents judged for it (NaN for
        a scorer that could not run, or with no judged document), and in judge runs the
        failure shares, the number of batched rounds and the judge's usage."""
        values: dict[str, float] = {}
        for scorer in self.scorers:
            judged = [ems for ems in (doc.ems[scorer] for doc in self.documents) if ems is not None]
            means = _means(judged) if scorer not in self.unavailable else [math.nan] * 3
            values.update(zip((f"{metric_prefix(self.method, scorer)}_{part}" for part in PARTS), means))
        if self.method == LLM:
            if self.ragchecker:
                judged = [doc.ragchecker for doc in self.documents if doc.ragchecker is not None]
                values.update(zip((f"{RAGCHECKER}_{part}" for part in PARTS), _means(judged)))
            n = len(self.documents)
            values["judge_failure"] = self.judge_failures / n if n else math.nan
            values["judge_parse_failure"] = self.judge_parse_failures / n if n else math.nan
            values["ems_judge_rounds"] = float(len(self.rounds))
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
            "summary_removal": self.summary_removal,
            "ragchecker": self.ragchecker,
            "prompts_hash": prompts.EMS_PROMPTS_HASH if self.method == LLM else None,
            "match_threshold": None if self.method == LLM else offline.MATCH_THRESHOLD,
            "judge_rounds": [dataclasses.asdict(r) for r in self.rounds],
            "stage_seconds": self.stage_seconds,
            "judge_failures": {
                "failed": self.judge_failures, "unparsed": self.judge_parse_failures, "first_error": self.first_error(),
            },
            "metrics": self.metrics(),
            "documents": [doc.as_dict() for doc in self.documents],
        }


def _means(triples: Sequence[tuple[float, float, float]]) -> list[float]:
    if not triples:
        return [math.nan] * 3
    return [sum(t[position] for t in triples) / len(triples) for position in range(3)]


# ------------------------------------------------------------------------------ rounds


@dataclass
class Requests:
    """The requests of one stage within a round, each with its parser and its owner (what
    the caller needs to put the answer back in place)."""

    stage: str
    requests: list = field(default_factory=list)
    parsers: list[Callable[[str], Any]] = field(default_factory=list)
    owners: list[Any] = field(default_factory=list)

    def add(self, request: Any, parser: Callable[[str], Any], owner: Any) -> None:
        self.requests.append(request)
        self.parsers.append(parser)
        self.owners.append(owner)


def ask_round(
    judge: Any, name: str, stages: Sequence[Requests], rounds: list[JudgeRound], max_attempts: int
) -> list[list[Any]]:
    """Send the requests of ``stages`` as one batch (one round, plus re-asks) and hand each
    stage its answers (:class:`lm_eval_fin.judge.ParsedAnswer`), in order. A round without
    requests sends nothing and is not counted."""
    from lm_eval_fin.judge import BatchStats, complete_parsed_answers

    requests = [request for stage in stages for request in stage.requests]
    if not requests:
        return [[] for _ in stages]
    parsers = [parser for stage in stages for parser in stage.parsers]
    answers = complete_parsed_answers(judge, requests, parsers, desc=f"EMS {name}", max_attempts=max_attempts)
    last = getattr(judge, "last_batch", None)
    reasked = int(last.extra.get("parse_retries", 0)) if isinstance(last, BatchStats) else 0
    rounds.append(JudgeRound(name, len(requests), reasked))
    split, start = [], 0
    for stage in stages:
        split.append(answers[start : start + len(stage.requests)])
        start += len(stage.requests)
    return split


def summary_requests(texts: Sequence[str]) -> Requests:
    """One request per distinct text of two units or more (a one-unit text has nothing to
    remove without removing everything)."""
    part = Requests("summary")
    for text in dict.fromkeys(texts):
        units = summary.units(text)
        if len(units) > 1:
            part.add(prompts.summary_request(units), functools.partial(parse_summary_bounds, n_units=len(units)), text)
    return part


def extract_requests(texts: Sequence[str], max_tokens: int | None, summary_removal: str) -> Requests:
    part = Requests("extraction")
    for text in dict.fromkeys(texts):
        part.add(prompts.extract_request(text, max_tokens, summary_removal), parse_points, text)
    return part


def match_requests(point_pairs: Sequence[tuple[int, list[str], list[str]]]) -> Requests:
    """One request per reference point of each (document, reference points, answer points);
    none where the answer has no points (every reference point is unmatched)."""
    part = Requests("matching")
    for doc, refs, answers in point_pairs:
        if answers:
            for position, ref in enumerate(refs):
                # an index off this answer's list is unreadable, so it is asked again
                part.add(
                    prompts.match_request(ref, answers),
                    functools.partial(parse_match, n_answer_points=len(answers)),
                    (doc, position),
                )
    return part


def claims_requests(checks: Sequence[tuple[int, str, str, list[str]]]) -> Requests:
    """Claim-checking requests of each (document, side, premise, claims): the distinct claims
    of a side, :data:`~lm_eval_fin.ems.prompts.CLAIMS_PER_REQUEST` to a request."""
    part = Requests("claims")
    size = prompts.CLAIMS_PER_REQUEST
    for doc, side, premise, points in checks:
        if not premise.strip():
            continue  # an empty text entails nothing: every claim is neutral without asking
        distinct = list(dict.fromkeys(points))
        for start in range(0, len(distinct), size):
            group = distinct[start : start + size]
            part.add(
                prompts.claims_request(premise, group),
                functools.partial(parse_verdicts, n_claims=len(group)),
                (doc, side, group),
            )
    return part


def score_pairs(
    scorer: str,
    pairs: Sequence[tuple[str, str]],
    judge: Any = None,
    max_score: int = 10,
    bertscore_model: str | None = None,
    max_attempts: int = MAX_ATTEMPTS,
    rounds: list[JudgeRound] | None = None,
) -> tuple[list[float | None] | None, list[Problem | None], list[Any]]:
    """Scores in [0, 1] of (reference point, answer point) pairs (None for a pair the LLM left
    unscored), each pair's problem and its judge work (a ``RequestUsage``, None without the
    judge); None for all scores when the scorer cannot run (a BERTScore model that will not
    load). The LLM scorer is one judge round, logged in ``rounds``."""
    from lm_eval_fin.measures import textsim

    if not pairs:
        return [], [], []
    refs = [ref for ref, _ in pairs]
    answers = [answer for _, answer in pairs]
    if scorer == ROUGE:
        return [f1 for _, _, f1 in textsim.rouge_l(answers, refs)], [None] * len(pairs), [None] * len(pairs)
    if scorer == BERTSCORE:
        scores = textsim.bertscore_f1(answers, refs, model=bertscore_model)
        # BERTScore F1 can dip below 0 for unrelated texts; EMS needs s_i in [0, 1].
        clipped: list[float | None] | None = None if scores is None else [min(1.0, max(0.0, s)) for s in scores]
        return clipped, [None] * len(pairs), [None] * len(pairs)
    if scorer == LLM:
        part = Requests("scoring")
        parse = functools.partial(parse_score, max_score=max_score)
        for pair, (ref, answer) in enumerate(pairs):
            part.add(prompts.score_request(ref, answer, max_score=max_score), parse, pair)
        (parsed,) = ask_round(judge, "score", [part], rounds if rounds is not None else [], max_attempts)
        return ([answer.value for answer in parsed], [problem_of("scoring", answer) for answer in parsed],
                [answer.usage for answer in parsed])
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
    summary_removal: str = DEFAULT_SUMMARY_REMOVAL,
    ragchecker: bool = True,
) -> EmsRun:
    """EMS (and with a judge the RAGChecker-style claim metrics) of each answer against its
    reference; see the module docstring.

    ``judge``: a judge from :func:`lm_eval_fin.judge.load_judge` (or anything with its
    ``complete``), or None for the offline extractor and matcher. ``scorers``: a subset of
    ``("llm", "rouge", "bertscore")``; by default all that apply. ``bertscore_model``: passed
    to :func:`lm_eval_fin.measures.textsim.bertscore_f1`. ``extract_max_tokens``: the extraction
    budget for every text; by default each text its own, scaled to its length
    (:func:`lm_eval_fin.ems.prompts.extract_budget`). ``max_attempts``: asks per judge
    request before its answer counts as a parse failure (1 = no re-asks).
    ``summary_removal``: ``"round"`` (a judge round of its own before extraction) or
    ``"folded"`` (the extraction prompt does it); the offline extractor has its own rules.
    ``ragchecker``: check claims for ``ragchecker_*`` (with a judge only).
    """
    if len(answers) != len(references):
        raise ValueError(f"{len(answers)} answers but {len(references)} references")
    if isinstance(max_score, bool) or not isinstance(max_score, int) or max_score < 1:
        raise ValueError(f"max_score must be a positive integer, got {max_score!r}")
    prompts.check_summary_removal(summary_removal)
    scorers = check_scorers(scorers, judge is not None)
    method = LLM if judge is not None else OFFLINE
    ragchecker = ragchecker and judge is not None
    answer_texts = [a if isinstance(a, str) else "" for a in answers]
    reference_texts = [r if isinstance(r, str) else "" for r in references]
    seconds: dict[str, float] = {}
    rounds: list[JudgeRound] = []
    n = len(answer_texts)
    ledger = Ledger(n)
    text_usage: dict[str, list[Any]] = {}  # the summary and extraction requests' work, by the text they served
    texts = [*reference_texts, *answer_texts]  # text t of document t % n; references first
    present = [text for text in texts if text.strip()]

    # 1. summary removal: the body of each text (None where the judge left it undecided)
    started = time.perf_counter()
    bodies: dict[str, str | None] = {text: text for text in present}
    bounds: dict[str, tuple[int, int] | None] = {}
    summary_problems: dict[str, Problem | None] = {}
    if judge is not None and summary_removal == "round":
        part = summary_requests(present)
        (answered,) = ask_round(judge, "summary", [part], rounds, max_attempts)
        for text, answer in zip(part.owners, answered):
            summary_problems[text] = problem_of("summary", answer)
            text_usage.setdefault(text, []).append(answer.usage)
            bounds[text] = answer.value
            bodies[text] = summary.body(text, *answer.value) if answer.value is not None else None
        bounds.update({text: (0, 0) for text in present if text not in bounds})
    seconds["summary"] = time.perf_counter() - started

    # 2. extraction: the points of each text (None where the judge left it unextracted)
    started = time.perf_counter()
    points_of: dict[str, list[str] | None] = {}
    extraction_problems: dict[str, Problem | None] = {}
    if judge is None:
        points_of = {text: offline.extract_points(text) for text in present}
    else:
        part = extract_requests([body for body in bodies.values() if body is not None], extract_max_tokens,
                                summary_removal)
        (answered,) = ask_round(judge, "extract", [part], rounds, max_attempts)
        by_body = {body: answer for body, answer in zip(part.owners, answered)}
        for text in present:
            body = bodies[text]
            answer = by_body.get(body) if body is not None else None
            points_of[text] = answer.value if answer is not None else None
            extraction_problems[text] = problem_of("extraction", answer) if answer is not None else None
            if answer is not None:
                text_usage.setdefault(text, []).append(answer.usage)
    for position, text in enumerate(texts):
        ledger.add(position % n, summary_problems.get(text))
        ledger.add(position % n, extraction_problems.get(text))
        for usage in text_usage.get(text, ()):
            ledger.charge(position % n, usage)
    point_pairs = [
        (points_of.get(reference_texts[doc], []) or [], points_of.get(answer_texts[doc], []) or []) for doc in range(n)
    ]
    extracted = [ledger.clear(doc, ("summary", "extraction")) for doc in range(n)]
    seconds["extraction"] = time.perf_counter() - started

    # 3. matching, and claim checking in the same batch
    started = time.perf_counter()
    alignments = [[NO_MATCH] * len(refs) for refs, _ in point_pairs]
    verdicts: list[dict[str, list[str] | None]] = [{"answer": None, "reference": None} for _ in range(n)]
    to_judge = [doc for doc in range(n) if extracted[doc]]
    if judge is None:
        for doc in to_judge:
            alignments[doc] = offline.match_points(*point_pairs[doc], match_threshold)
    else:
        matching = match_requests([(doc, *point_pairs[doc]) for doc in to_judge])
        checks: list[tuple[int, str, str, list[str]]] = []
        if ragchecker:
            for doc in to_judge:
                refs, answer_points = point_pairs[doc]
                checks += [
                    (doc, "answer", reference_texts[doc], answer_points), (doc, "reference", answer_texts[doc], refs)
                ]
        claim_part = claims_requests(checks)
        match_answers, claim_answers = ask_round(judge, "match + claims", [matching, claim_part], rounds, max_attempts)
        for (doc, position), answer in zip(matching.owners, match_answers):
            ledger.add(doc, problem_of("matching", answer))
            ledger.charge(doc, answer.usage)
            if answer.value is not None:
                alignments[doc][position] = answer.value
        verdict_of: dict[tuple[int, str, str], str] = {}
        for (doc, side, group), answer in zip(claim_part.owners, claim_answers):
            ledger.add(doc, problem_of("claims", answer))
            ledger.charge(doc, answer.usage)
            if answer.value is not None:
                verdict_of.update({(doc, side, claim): verdict for claim, verdict in zip(group, answer.value)})
        for doc, side, premise, claim_points in checks:
            if ledger.clear(doc, RAGCHECKER_NEEDS):
                verdicts[doc][side] = [
                    verdict_of[(doc, side, point)] if premise.strip() else "neutral" for point in claim_points
                ]
    aligned = [extracted[doc] and ledger.clear(doc, EMS_NEEDS) for doc in range(n)]
    seconds["matching"] = time.perf_counter() - started

    # 4. scoring: every matched pair of the aligned documents, once per scorer
    pair_owners = [
        (doc, i) for doc in range(n) if aligned[doc] for i, a in enumerate(alignments[doc]) if a != NO_MATCH
    ]
    pairs = [(point_pairs[doc][0][i], point_pairs[doc][1][alignments[doc][i]]) for doc, i in pair_owners]
    started = time.perf_counter()
    pair_scores: dict[str, list[float | None] | None] = {}
    for scorer in scorers:
        pair_scores[scorer], problems, pair_usage = score_pairs(
            scorer, pairs, judge, max_score, bertscore_model, max_attempts, rounds
        )
        for (doc, _), problem, usage in zip(pair_owners, problems, pair_usage):
            ledger.add(doc, problem)
            ledger.charge(doc, usage)
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
            scorer_pair_scores = pair_scores[scorer]
            if scorer_pair_scores is None:
                scores[scorer] = ems[scorer] = None
                continue
            per_point: list[float | None] = [0.0] * len(refs)  # s_i is 0 where unmatched
            for i, pair in pairs_of.get(doc, ()):
                per_point[i] = scorer_pair_scores[pair]
            scores[scorer] = per_point
            known = [value for value in per_point if value is not None]
            judged = aligned[doc] and len(known) == len(per_point)
            ems[scorer] = ems_scores(alignment, known, len(answer_points)) if judged else None
        # verdicts of both sides: checked in step 3 (judge, ragchecker, points); still clear after scoring
        answer_verdicts, reference_verdicts, claim_metrics = verdicts[doc]["answer"], verdicts[doc]["reference"], None
        if answer_verdicts is not None and reference_verdicts is not None and ledger.clear(doc, RAGCHECKER_NEEDS):
            claim_metrics = claims.claim_scores(answer_verdicts, reference_verdicts)
        documents.append(
            DocumentEms(
                refs,
                answer_points,
                alignment,
                scores,
                ems,
                ragchecker=claim_metrics,
                verdicts=verdicts[doc],
                summaries={"reference": bounds.get(reference_texts[doc]), "answer": bounds.get(answer_texts[doc])}
                if bounds else None,
                parse_failures=ledger.parse_failures(doc),
                judge_error=ledger.first_error(doc),
                judge_usage=ledger.usage[doc].as_dict() if judge is not None else None,
            )
        )

    return EmsRun(
        method=method,
        scorers=scorers,
        documents=documents,
        judge=getattr(judge, "spec", None) if judge is not None else None,
        bertscore_model=bertscore_model if BERTSCORE in scorers else None,
        max_score=max_score,
        summary_removal=summary_removal if judge is not None else None,
        ragchecker=ragchecker,
        rounds=rounds,
        stage_seconds=seconds,
        unavailable=unavailable,
    )
