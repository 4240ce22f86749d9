"""FinCARDS end to end: the five variants of the paper's ablation table over a set of queries.

Variants (rows of the paper's table):

* ``bm25``: stage 1 alone;
* ``llm``: one zero-shot listwise pass of the judge over the stage-1 candidates' raw text;
* ``s1+s3``: stage 1, cards, then the stage-3 tournament over all stage-1 candidates;
* ``s1+s2``: stage 1, cards and intent, then stage-2 screening (its order is the ranking);
* ``full``: stage 1, cards, intent, stage-2 screening, then the tournament over its top 50.

Stages run in this order, each as one judge batch across all queries (and across the variants
that share it): cards (one request per distinct chunk among all stage-1 candidates, shared
by every query on the same filing), intents, the zero-shot pass, stage-2 screening, then the
stage-3 rounds (one batch per round, over every tournament still running). Every variant's
ranking covers all chunks of the filing: the method's own order first, then the chunks it
did not place in BM25 order.

A batch mixes requests of many queries and groups, so each request gets its own parser,
bound to the chunks it showed: an answer that names only chunks of another group or query
counts as unparsable and is asked again, rather than read as an empty answer. Costs are
booked per query and per stage (cards, intent, llm, screening, tournament); a card's cost
is split over the queries whose candidates include its chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Hashable, Mapping, Sequence, TypeVar

from lm_eval_fin.finagentbench import parse_challenge_prompt, prompt_text
from lm_eval_fin.judge import Judge, JudgeRequest, complete_parsed
from lm_eval_fin.ranking import rank_metrics
from lm_eval_fin.rerank import bm25, cards, intent, screening, tournament, zeroshot
from lm_eval_fin.rerank.audit import card_matches, fill_ranking
from lm_eval_fin.rerank.cost import Cost, MeteredJudge, costs_by_stage, split_by_use

VARIANTS = ("bm25", "llm", "s1+s3", "s1+s2", "full")
CARD_VARIANTS = ("s1+s3", "s1+s2", "full")
SCREENING_VARIANTS = ("s1+s2", "full")
TOURNAMENT_VARIANTS = ("s1+s3", "full")

# Output budgets per stage (tokens), capped by the judge's --judge-max-tokens.
STAGE_TOKENS = {"cards": 512, "intent": 256, "screening": 768, "tournament": 384, "llm": 256}

T = TypeVar("T")


@dataclass(frozen=True)
class FinCardsConfig:
    """Every knob of the method; the defaults are the paper's."""

    k: int = 10
    seed: int = 0
    max_tokens: int = 1024
    max_attempts: int = 3
    # stage 1
    k1: float = bm25.K1
    b: float = bm25.B
    candidate_ratio: float = bm25.CANDIDATE_RATIO
    min_candidates: int = bm25.MIN_CANDIDATES
    max_candidates: int = bm25.MAX_CANDIDATES
    # stage 2
    group_size: int = screening.GROUP_SIZE
    min_keep: int = screening.MIN_KEEP
    max_keep: int = screening.MAX_KEEP
    top_n: int = screening.TOP_N
    # stage 3
    small_group: int = tournament.SMALL_GROUP
    large_group: int = tournament.LARGE_GROUP
    max_rounds: int = tournament.MAX_ROUNDS
    jaccard_stop: float = tournament.JACCARD_STOP
    # llm baseline: characters per chunk, the prompt's budget over the candidates, at most
    # llm_chunk_chars
    llm_chunk_chars: int = zeroshot.CHUNK_CHARS
    llm_prompt_chars: int = zeroshot.PROMPT_CHARS

    def budget(self, stage: str) -> int:
        return max(1, min(STAGE_TOKENS[stage], self.max_tokens))


@dataclass(frozen=True)
class Query:
    """One chunk-ranking query: the question, the filing's chunks by index, the grades."""

    id: str
    question: str
    chunks: Mapping[int, str]
    qrel: Mapping[str, Any] | None = None


def queries_from_records(records: Sequence[Mapping[str, Any]]) -> list[Query]:
    """Queries from challenge records (see :mod:`lm_eval_fin.finagentbench`). A record whose
    prompt lists no chunks becomes a query with no chunks (an empty ranking, scores 0)."""
    queries = []
    for record in records:
        question, chunks = parse_challenge_prompt(prompt_text(record))
        qrel = record.get("qrel")
        queries.append(
            Query(
                id=str(record.get("uuid", record.get("_id"))),
                question=question,
                chunks=chunks,
                qrel={str(k): v for k, v in qrel.items()} if qrel is not None else None,
            )
        )
    return queries


@dataclass
class VariantResult:
    """One variant's answer to one query."""

    query_id: str
    variant: str
    ranking: list[int]
    audit: dict[str, Any]
    cost: dict[str, float]
    scores: dict[str, float] | None = None
    rank_variance: float | None = None

    def as_record(self) -> dict[str, Any]:
        return {
            "id": self.query_id,
            "variant": self.variant,
            "ranking": self.ranking,
            "scores": self.scores,
            "rank_variance": self.rank_variance,
            "cost": self.cost,
            "audit": self.audit,
        }


@dataclass
class StageCount:
    """Requests of a stage, how many of them ended without a usable answer, and what the
    stage cost (every call, re-asks included, over the whole run)."""

    requests: int = 0
    unusable: int = 0
    cost: Cost = field(default_factory=Cost)


@dataclass
class RunResult:
    results: list[VariantResult]
    stages: dict[str, StageCount] = field(default_factory=dict)
    card_cost: Cost = field(default_factory=Cost)
    distinct_chunks: int = 0


# ---------------------------------------------------------------------------------------------
# Small helpers


def _ask(
    judge: MeteredJudge,
    stage: str,
    requests: Sequence[JudgeRequest],
    owners: Sequence[Hashable],
    parse: Callable[[str], T | None] | Sequence[Callable[[str], T | None]],
    config: FinCardsConfig,
    counts: dict[str, StageCount],
) -> list[T | None]:
    """One stage batch: book owners, send, parse with re-asks, count unusable answers.
    ``parse`` is one parser, or one per request (bound to the chunks that request showed)."""
    if not requests:
        return []
    judge.expect(requests, owners)
    parsed = complete_parsed(judge, requests, parse, desc=f"fincards {stage}", max_attempts=config.max_attempts)
    count = counts.setdefault(stage, StageCount())
    count.requests += len(requests)
    count.unusable += sum(value is None for value in parsed)
    return parsed


def _score_of(value: Mapping[int, float], chunk: int) -> float:
    return round(float(value.get(chunk, 0.0)), 4)


# ---------------------------------------------------------------------------------------------
# The run


def run_fincards(
    queries: Sequence[Query],
    judge: Judge | None,
    variants: Sequence[str] = ("full",),
    config: FinCardsConfig = FinCardsConfig(),
) -> RunResult:
    """Run ``variants`` over ``queries``; ``judge`` may be None when only ``bm25`` runs."""
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
    if judge is None and any(v != "bm25" for v in variants):
        raise ValueError("variants other than bm25 need a judge (--judge or $LM_EVAL_FIN_JUDGE)")
    metered = MeteredJudge(judge) if judge is not None else None
    counts: dict[str, StageCount] = {}
    n = len(queries)

    # Stage 1: BM25 within each filing (one index per distinct filing).
    indexes: dict[tuple, bm25.FilingIndex] = {}
    stage1 = []
    for q in queries:
        filing = tuple((i, cards.chunk_key(text)) for i, text in sorted(q.chunks.items()))
        if filing not in indexes:
            indexes[filing] = bm25.FilingIndex(q.chunks, k1=config.k1, b=config.b)
        stage1.append(
            bm25.bm25_stage(
                q.question, q.chunks, ratio=config.candidate_ratio, minimum=config.min_candidates,
                maximum=config.max_candidates, index=indexes[filing],
            )
        )
    bm25_rank = [s.rank for s in stage1]

    # Cards: one request per distinct chunk text among the stage-1 candidates.
    card_of: list[dict[int, dict]] = [{} for _ in queries]
    distinct: dict[str, str] = {}
    if any(v in CARD_VARIANTS for v in variants):
        for q, s1 in zip(queries, stage1):
            for chunk in s1.candidates:
                distinct.setdefault(cards.chunk_key(q.chunks[chunk]), q.chunks[chunk])
        keys = list(distinct)
        made = _ask(
            metered, "cards", [cards.card_request(distinct[k], config.budget("cards")) for k in keys],
            [("cards", k) for k in keys], cards.parse_card, config, counts,
        )
        by_key = {k: card if card is not None else cards.fallback_card(distinct[k]) for k, card in zip(keys, made)}
        for qi, (q, s1) in enumerate(zip(queries, stage1)):
            card_of[qi] = {chunk: by_key[cards.chunk_key(q.chunks[chunk])] for chunk in s1.candidates}
    cost_of_card = {k: metered.cost([("cards", k)]) for k in distinct} if metered else {}
    card_cost = sum(cost_of_card.values(), Cost())
    # a card serves every query whose candidates include its chunk: they share its cost
    card_share = split_by_use(
        cost_of_card, [{cards.chunk_key(q.chunks[c]) for c in s1.candidates} for q, s1 in zip(queries, stage1)]
    )

    # Intents (stage 2 reads them).
    intents: list[dict | None] = [None] * n
    if any(v in SCREENING_VARIANTS for v in variants):
        intents = _ask(
            metered, "intent", [intent.intent_request(q.question, config.budget("intent")) for q in queries],
            [("intent", qi) for qi in range(n)], intent.parse_intent, config, counts,
        )
    quotas = [intent.coverage_quotas(intents[qi], q.question) for qi, q in enumerate(queries)]

    # The zero-shot baseline.
    named: list[list[int] | None] = [None] * n
    if "llm" in variants:
        asked = [qi for qi in range(n) if stage1[qi].candidates]
        answers = _ask(
            metered, "llm",
            [
                zeroshot.zeroshot_request(
                    queries[qi].question, queries[qi].chunks, stage1[qi].candidates, config.k,
                    config.budget("llm"), config.llm_chunk_chars, config.llm_prompt_chars,
                )
                for qi in asked
            ],
            [("llm", qi) for qi in asked],
            [partial(tournament.parse_listwise, ids=stage1[qi].candidates) for qi in asked], config, counts,
        )
        for qi, answer in zip(asked, answers):
            named[qi] = answer

    # Stage 2: round-robin screening.
    stage2_groups: list[list[list[int]]] = [[] for _ in queries]
    stage2_picks: list[list[list[screening.Pick]]] = [[] for _ in queries]
    stage2_kept: list[list[screening.Pick]] = [[] for _ in queries]
    if any(v in SCREENING_VARIANTS for v in variants):
        jobs = []
        for qi, q in enumerate(queries):
            stage2_groups[qi] = screening.round_robin_groups(list(stage1[qi].candidates), config.group_size)
            jobs += [(qi, gi, group) for gi, group in enumerate(stage2_groups[qi])]
        answers = _ask(
            metered, "screening",
            [
                screening.screening_request(
                    queries[qi].question, intents[qi], [(c, card_of[qi][c]) for c in group], quotas[qi],
                    config.budget("screening"), config.min_keep, config.max_keep,
                )
                for qi, _, group in jobs
            ],
            [("screening", qi) for qi, _, _ in jobs],
            [
                partial(
                    screening.parse_selection, group_ids=group,
                    high=screening.keep_bounds(len(group), config.min_keep, config.max_keep)[1],
                )
                for _, _, group in jobs
            ],
            config, counts,
        )
        for (qi, gi, group), selection in zip(jobs, answers):
            picks = screening.group_picks(gi, group, selection, card_of[qi], quotas[qi], config.min_keep)
            stage2_picks[qi].append(picks)
        for qi in range(n):
            flat = [p for picks in stage2_picks[qi] for p in picks]
            stage2_kept[qi] = screening.merge_picks(flat, bm25_rank[qi], config.top_n, quotas[qi], card_of[qi])

    # Stage 3: bootstrap tournaments, one batch per round across every running tournament.
    tournaments: dict[tuple[str, int], tournament.Tournament] = {}
    for variant in TOURNAMENT_VARIANTS:
        if variant not in variants:
            continue
        for qi, q in enumerate(queries):
            pool = [p.chunk for p in stage2_kept[qi]] if variant == "full" else list(stage1[qi].candidates)
            tournaments[(variant, qi)] = tournament.Tournament(
                pool, seed=f"{config.seed}:{q.id}:{variant}", top_k=config.k, max_rounds=config.max_rounds,
                stop_at=config.jaccard_stop, small=config.small_group, large=config.large_group,
            )
    while running := [key for key, t in tournaments.items() if not t.finished]:
        jobs = []
        plans = {}
        for key in running:
            plans[key] = tournaments[key].plan_round()
            jobs += [(key, group) for group in plans[key]]
        answers = _ask(
            metered, "tournament",
            [
                tournament.ranking_request(
                    queries[qi].question, [(c, card_of[qi][c]) for c in group], config.budget("tournament")
                )
                for (_, qi), group in jobs
            ],
            [(f"tournament:{variant}", qi) for (variant, qi), _ in jobs],
            [partial(tournament.parse_listwise, ids=group) for _, group in jobs], config, counts,
        )
        rankings: dict[tuple[str, int], list] = {key: [] for key in running}
        for (key, _), ranking in zip(jobs, answers):
            rankings[key].append(ranking)
        for key in running:
            tournaments[key].record_round(rankings[key], plans[key])

    # Assemble rankings, scores, costs and audit traces.
    results = []
    for qi, q in enumerate(queries):
        s1 = stage1[qi]
        base_audit = {
            "stage1": {
                "chunks": len(q.chunks),
                "candidates": list(s1.candidates),
                "bm25": {str(c): _score_of(s1.scores, c) for c in s1.candidates},
            }
        }
        for variant in variants:
            audit = dict(base_audit)
            cost = Cost()
            variance = None
            if variant == "bm25":
                ranking = list(s1.order)
                why = {c: f"BM25 rank {bm25_rank[qi][c]} (score {_score_of(s1.scores, c)})" for c in ranking}
            elif variant == "llm":
                head = named[qi] or []
                ranking = fill_ranking(head, s1.order)
                audit["llm"] = {"named": head, "parsed": named[qi] is not None}
                cost = metered.cost([("llm", qi)])
                why = {c: f"named {i} of {len(head)} by the zero-shot judge" for i, c in enumerate(head, 1)}
            else:
                if variant in SCREENING_VARIANTS:
                    audit["intent"] = intents[qi]
                    audit["quotas"] = quotas[qi]
                    audit["stage2"] = _stage2_audit(stage2_groups[qi], stage2_picks[qi], stage2_kept[qi])
                    cost = cost + metered.cost([("intent", qi), ("screening", qi)])
                if variant in TOURNAMENT_VARIANTS:
                    t = tournaments[(variant, qi)]
                    audit["stage3"] = _stage3_audit(t)
                    cost = cost + metered.cost([(f"tournament:{variant}", qi)])
                    head = t.final_order()
                    variance = t.rank_variance()
                else:
                    head = [p.chunk for p in stage2_kept[qi]]
                ranking = fill_ranking(head, s1.order)
                kept = stage2_kept[qi] if variant in SCREENING_VARIANTS else []
                why = _why(head, kept, tournaments.get((variant, qi)))
            for c in ranking:
                why.setdefault(c, f"not placed by {variant}: BM25 order (rank {bm25_rank[qi][c]})")
            audit["final"] = [
                {
                    "rank": rank,
                    "id": c,
                    "why": why[c],
                    **(
                        {"card_matches": card_matches(card_of[qi][c], q.question, intents[qi]),
                         "card_source": card_of[qi][c]["source"]}
                        if c in card_of[qi] and variant in CARD_VARIANTS else {}
                    ),
                }
                for rank, c in enumerate(ranking[: config.k], start=1)
            ]
            cost_fields = cost.as_dict()
            if variant in CARD_VARIANTS:
                cost_fields = {name: value + card_share[qi][name] for name, value in cost_fields.items()}
            scores = rank_metrics(ranking, q.qrel, config.k) if q.qrel is not None else None
            results.append(VariantResult(q.id, variant, ranking, audit, cost_fields, scores, variance))
    for stage, stage_cost in (costs_by_stage(metered.costs) if metered else {}).items():
        counts.setdefault(stage, StageCount()).cost = stage_cost
    return RunResult(results, counts, card_cost, len(distinct))


# ---------------------------------------------------------------------------------------------
# Audit pieces


def _stage2_audit(groups, picks_per_group, kept) -> dict[str, Any]:
    return {
        "groups": [
            {
                "group": gi,
                "chunks": group,
                "kept": [{"id": p.chunk, "score": p.score, "reason": p.reason, "via": p.via} for p in picks],
            }
            for gi, (group, picks) in enumerate(zip(groups, picks_per_group))
        ],
        "kept": [p.chunk for p in kept],
    }


def _stage3_audit(t: tournament.Tournament) -> dict[str, Any]:
    return {
        "candidates": len(t.prior),
        "group_size": t.size,
        "rounds": [
            # top_k: the round's own ranking; running_top_k: the aggregate after the round,
            # which the stop rule (jaccard) and the rank variance look at
            {"groups": groups, "top_k": order[: t.top_k], "running_top_k": running[: t.top_k], "jaccard": similarity}
            for groups, order, running, similarity in zip(t.rounds, t.round_orders, t.running_orders, t.similarities)
        ],
        "stopped": t.stopped,
        "points": {str(c): round(p, 4) for c, p in t.points().items()},
        "rank_variance": t.rank_variance(),
    }


def _why(head: Sequence[int], kept: Sequence[screening.Pick], t: tournament.Tournament | None) -> dict[int, str]:
    """Why each chunk of a stage's output is where it is: its Borda points and per-round
    ranks (stage 3), its stage-2 score, group, reason and whether a quota added it."""
    stage2 = {p.chunk: p for p in kept}
    points = t.points() if t is not None else {}
    reasons = {}
    for position, chunk in enumerate(head, start=1):
        parts = []
        if t is not None:
            rounds = ", ".join(map(str, t.round_positions(chunk)))
            running = ", ".join(map(str, t.running_positions(chunk)))
            parts.append(
                f"Borda {points[chunk]:.2f} over {len(t.rounds)} rounds (round ranks {rounds}; running ranks {running})"
            )
        if chunk in stage2:
            pick = stage2[chunk]
            note = f"stage-2 score {pick.score:g} in group {pick.group}"
            if pick.via != "judge":
                note += f" [{pick.via}]"
            if pick.reason:
                note += f": {pick.reason}"
            parts.append(note)
        reasons[chunk] = "; ".join(parts) or f"position {position}"
    return reasons
