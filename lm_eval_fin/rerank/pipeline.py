"""FinCARDS end to end: the five variants of the paper's ablation table over a set of queries.

Variants (rows of the paper's table):

* ``bm25``: stage 1 alone;
* ``llm``: one zero-shot listwise pass of the judge over the stage-1 candidates' raw text;
* ``s1+s3``: stage 1, cards, then the stage-3 tournament over all stage-1 candidates;
* ``s1+s2``: stage 1, cards and intent, then stage-2 screening (its order is the ranking);
* ``full``: stage 1, cards, intent, stage-2 screening, then the tournament over its top 50.

:class:`FinCardsConfig` holds every knob, the paper's Table 2 card ablations
(:mod:`~lm_eval_fin.rerank.cardview`) and Table 3 stage-3 strategies
(:mod:`~lm_eval_fin.rerank.tournament`) among them; the defaults are the full method.

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

Judge failures. Every request ends judged, unparsable (the judge answered, nothing usable
after the re-asks) or failed (the judge did not answer: transport, HTTP, timeout). Both are
counted per stage and per query. An unparsable answer is replaced by the stage's documented
fallback (a card by the rules, a group by its prior order) and the ranking is scored, marked
``fallback``. A failed request is a judge outage, not a judgment: the queries whose variant
needed it (its candidates' cards, its intent, screening groups or tournament rounds) get no
ranking and no scores for that variant (``status: "failed"``), never the fallback's; a rerun
resumes from the judge cache, which keeps every answer that came back.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any, TypeVar

from lm_eval_fin.judge import Judge, JudgeRequest, complete_parsed_answers
from lm_eval_fin.measures.ranking import GAINS, rank_metrics
from lm_eval_fin.rerank import bm25, cardview, intent, screening, tournament, zeroshot
from lm_eval_fin.rerank.audit import card_matches, fill_ranking, stage2_audit, stage3_audit, why_placed
from lm_eval_fin.rerank.cards import chunk_key
from lm_eval_fin.rerank.cost import Cost, MeteredJudge, costs_by_stage, split_by_use
from lm_eval_fin.rerank.results import JudgeOutcome, Query, RunResult, StageCount, VariantResult

__all__ = [
    "VARIANTS", "FinCardsConfig", "JudgeOutcome", "Query", "QueryState", "RunResult", "StageCount", "VariantResult",
    "run_fincards",
]

VARIANTS = ("bm25", "llm", "s1+s3", "s1+s2", "full")
CARD_VARIANTS = ("s1+s3", "s1+s2", "full")
SCREENING_VARIANTS = ("s1+s2", "full")
TOURNAMENT_VARIANTS = ("s1+s3", "full")

# Output budgets per stage (tokens), capped by the judge's --judge_max_tokens.
STAGE_TOKENS = {"cards": 512, "intent": 256, "screening": 768, "tournament": 384, "llm": 256}

T = TypeVar("T")


@dataclass(frozen=True)
class FinCardsConfig:
    """Every knob of the method; the defaults are the paper's full pipeline."""

    k: int = 10
    gain: str = "exponential"  # nDCG's gain, as the fin_agentbench tasks' default
    seed: int = 0
    max_tokens: int = 1024
    max_attempts: int = 3
    # stage 1
    k1: float = bm25.K1
    b: float = bm25.B
    candidate_ratio: float = bm25.CANDIDATE_RATIO
    min_candidates: int = bm25.MIN_CANDIDATES
    max_candidates: int = bm25.MAX_CANDIDATES
    # cards (Table 2): which card, which field groups it loses, what of it the judge sees
    card_kind: str = "core"
    card_without: tuple[str, ...] = ()
    card_view: str = "card"
    raw_chars: int = cardview.RAW_CHARS
    # stage 2
    group_size: int = screening.GROUP_SIZE
    min_keep: int = screening.MIN_KEEP
    max_keep: int = screening.MAX_KEEP
    top_n: int = screening.TOP_N
    # stage 3 (Table 3): rounds, regrouping, aggregation, early stop
    small_group: int = tournament.SMALL_GROUP
    large_group: int = tournament.LARGE_GROUP
    max_rounds: int = tournament.MAX_ROUNDS
    jaccard_stop: float = tournament.JACCARD_STOP
    regroup: bool = True
    aggregation: str = "borda"
    early_stop: bool = True
    # llm baseline: characters per chunk, the prompt's budget over the candidates, at most
    # llm_chunk_chars
    llm_chunk_chars: int = zeroshot.CHUNK_CHARS
    llm_prompt_chars: int = zeroshot.PROMPT_CHARS

    def __post_init__(self) -> None:
        cardview.check_kind(self.card_kind)
        if self.card_view not in cardview.VIEWS:
            raise ValueError(f"unknown card view {self.card_view!r}; choose from {list(cardview.VIEWS)}")
        unknown = [g for g in self.card_without if g not in cardview.GROUPS]
        if unknown:
            raise ValueError(f"unknown card field group(s) {unknown}; choose from {list(cardview.GROUPS)}")
        if self.aggregation not in tournament.AGGREGATIONS:
            raise ValueError(f"unknown aggregation {self.aggregation!r}; choose from {list(tournament.AGGREGATIONS)}")
        if self.gain not in GAINS:
            raise ValueError(f"unknown gain {self.gain!r}; choose from {list(GAINS)}")
        if self.max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")

    def budget(self, stage: str) -> int:
        return max(1, min(STAGE_TOKENS[stage], self.max_tokens))

    def changes(self) -> dict[str, Any]:
        """The fields that differ from the defaults (what a run's output records)."""
        default = FinCardsConfig()
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)}


# ---------------------------------------------------------------------------------------------
# Small helpers


def _score_of(value: Mapping[int, float], chunk: int) -> float:
    return round(float(value.get(chunk, 0.0)), 4)


# ---------------------------------------------------------------------------------------------
# The run: one state per query, filled stage by stage; each stage is one judge batch across queries


@dataclass
class QueryState:
    """What the run has decided for one query so far."""

    query: Query
    stage1: bm25.Stage1
    cards: dict[int, dict] = field(default_factory=dict)  # candidate chunk -> its card (as the stages see it)
    card_share: Mapping[str, float] = field(default_factory=lambda: Cost().as_dict())
    intent: dict | None = None
    quotas: list = field(default_factory=list)
    named: list[int] | None = None  # the zero-shot baseline's ranking
    groups: list[list[int]] = field(default_factory=list)  # stage-2 groups
    picks: list[list[screening.Pick]] = field(default_factory=list)  # stage-2 picks per group
    kept: list[screening.Pick] = field(default_factory=list)  # stage-2 output
    tournaments: dict[str, tournament.Tournament] = field(default_factory=dict)  # variant -> stage 3

    @property
    def bm25_rank(self) -> dict[int, int]:
        return self.stage1.rank

    def card_keys(self) -> set[str]:
        return {chunk_key(self.query.chunks[c]) for c in self.stage1.candidates}

    def shown(self, chunk: int, config: FinCardsConfig) -> str:
        """The line that shows a candidate to the judge in stages 2 and 3."""
        return cardview.show(chunk, self.cards[chunk], self.query.chunks[chunk], config.card_view, config.raw_chars)


@dataclass
class _Run:
    """The judge, its meter, the stage counts and the judge outcome of every owner, shared by
    every stage of one run."""

    judge: MeteredJudge | None
    config: FinCardsConfig
    counts: dict[str, StageCount] = field(default_factory=dict)
    outcomes: dict[Hashable, JudgeOutcome] = field(default_factory=dict)

    def ask(
        self,
        stage: str,
        requests: Sequence[JudgeRequest],
        owners: Sequence[Hashable],
        parse: Callable[[str], T | None] | Sequence[Callable[[str], T | None]],
    ) -> list[T | None]:
        """One stage batch: book owners, send, parse with re-asks, count failed and unparsable
        requests per stage and per owner. ``parse`` is one parser, or one per request (bound
        to the chunks that request showed)."""
        if not requests:
            return []
        assert self.judge is not None, "run_fincards refuses a variant that asks a judge when there is none"
        self.judge.expect(requests, owners)
        answers = complete_parsed_answers(
            self.judge, requests, parse, desc=f"fincards {stage}", max_attempts=self.config.max_attempts
        )
        count = self.counts.setdefault(stage, StageCount())
        count.requests += len(requests)
        for owner, answer in zip(owners, answers):
            outcome = JudgeOutcome(int(answer.failed), int(answer.unparsed), answer.error)
            self.outcomes.setdefault(owner, JudgeOutcome()).add(outcome)
            count.failed += outcome.failed
            count.unparsed += outcome.unparsed
            count.first_error = count.first_error or answer.error
        return [answer.value for answer in answers]

    def cost(self, owners: Sequence[Hashable]) -> Cost:
        return self.judge.cost(owners) if self.judge is not None else Cost()

    def lost(self, state: QueryState, qi: int, variant: str) -> bool:
        """Whether a request this variant of this query needs has failed already: its later
        stages are not asked (their answers could not make a ranking)."""
        return self.outcome(_needs(state, qi, variant)).failed > 0

    def outcome(self, owners: Iterable[Hashable]) -> JudgeOutcome:
        total = JudgeOutcome()
        for owner in owners:
            if owner in self.outcomes:
                total.add(self.outcomes[owner])
        return total


def bm25_states(queries: Sequence[Query], config: FinCardsConfig) -> list[QueryState]:
    """Stage 1: BM25 within each filing (one index per distinct filing)."""
    indexes: dict[tuple, bm25.FilingIndex] = {}
    states = []
    for q in queries:
        filing = tuple((i, chunk_key(text)) for i, text in sorted(q.chunks.items()))
        if filing not in indexes:
            indexes[filing] = bm25.FilingIndex(q.chunks, k1=config.k1, b=config.b)
        stage1 = bm25.bm25_stage(
            q.question, q.chunks, ratio=config.candidate_ratio, minimum=config.min_candidates,
            maximum=config.max_candidates, index=indexes[filing],
        )
        states.append(QueryState(q, stage1))
    return states


def card_stage(states: Sequence[QueryState], run: _Run) -> tuple[Cost, int, int, int]:
    """One card per distinct chunk text among the stage-1 candidates, shared by every query
    whose candidates include it (they share its cost too), with the ablated field groups
    removed. The ``raw`` view asks for no card: cards built by the rules serve the quotas and
    the audit. Returns the cards' total cost, the number of distinct chunks, and the numeric
    spans kept and dropped on the judge's cards."""
    config = run.config
    distinct: dict[str, str] = {}
    for state in states:
        for chunk in state.stage1.candidates:
            distinct.setdefault(chunk_key(state.query.chunks[chunk]), state.query.chunks[chunk])
    keys = list(distinct)
    if config.card_view == "raw":
        made: list[dict | None] = [None] * len(keys)
    else:
        made = run.ask(
            "cards", [cardview.card_request(config.card_kind, distinct[k], config.budget("cards")) for k in keys],
            [("cards", k) for k in keys], [cardview.card_parser(config.card_kind, distinct[k]) for k in keys],
        )
    spans_kept = sum(len(c.get("numeric_spans", [])) for c in made if c is not None)
    spans_dropped = sum(len(c.get("checks", {}).get("spans_dropped", [])) for c in made if c is not None)
    by_key = {}
    for k, card in zip(keys, made):
        if card is None:
            card = cardview.fallback_card(config.card_kind, distinct[k])
            if config.card_view == "raw":
                card["source"] = "rules"  # nothing was asked: not a fallback
        by_key[k] = cardview.without(card, config.card_without)
    for state in states:
        state.cards = {c: by_key[chunk_key(state.query.chunks[c])] for c in state.stage1.candidates}
    cost_of_card = {k: run.cost([("cards", k)]) for k in distinct}
    for state, share in zip(states, split_by_use(cost_of_card, [s.card_keys() for s in states])):
        state.card_share = share
    return sum(cost_of_card.values(), Cost()), len(distinct), spans_kept, spans_dropped


def intent_stage(states: Sequence[QueryState], run: _Run) -> None:
    """The query intents, and the coverage quotas stage 2 reads from them."""
    intents = run.ask(
        "intent", [intent.intent_request(s.query.question, run.config.budget("intent")) for s in states],
        [("intent", qi) for qi in range(len(states))], intent.parse_intent,
    )
    for state, found in zip(states, intents):
        state.intent = found


def llm_stage(states: Sequence[QueryState], run: _Run) -> None:
    """The zero-shot listwise baseline over the stage-1 candidates' raw text."""
    asked = [qi for qi, state in enumerate(states) if state.stage1.candidates]
    config = run.config
    answers = run.ask(
        "llm",
        [
            zeroshot.zeroshot_request(
                states[qi].query.question, states[qi].query.chunks, states[qi].stage1.candidates, config.k,
                config.budget("llm"), config.llm_chunk_chars, config.llm_prompt_chars,
            )
            for qi in asked
        ],
        [("llm", qi) for qi in asked],
        [partial(tournament.parse_listwise, ids=states[qi].stage1.candidates) for qi in asked],
    )
    for qi, answer in zip(asked, answers):
        states[qi].named = answer


def screening_stage(states: Sequence[QueryState], run: _Run) -> None:
    """Stage 2: round-robin groups screened from cards, with the intent's quotas."""
    config = run.config
    jobs = []
    for qi, state in enumerate(states):
        if run.lost(state, qi, "s1+s2"):  # a card or the intent failed: no screening to do
            continue
        state.groups = screening.round_robin_groups(list(state.stage1.candidates), config.group_size)
        jobs += [(qi, gi, group) for gi, group in enumerate(state.groups)]
    answers = run.ask(
        "screening",
        [
            screening.screening_request(
                states[qi].query.question, states[qi].intent, [states[qi].shown(c, config) for c in group],
                states[qi].quotas, config.budget("screening"), config.min_keep, config.max_keep,
                raw=config.card_view == "raw",
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
    )
    for (qi, gi, group), selection in zip(jobs, answers):
        state = states[qi]
        state.picks.append(screening.group_picks(gi, group, selection, state.cards, state.quotas, config.min_keep))
    for state in states:
        flat = [p for picks in state.picks for p in picks]
        state.kept = screening.merge_picks(flat, state.bm25_rank, config.top_n, state.quotas, state.cards)


def tournament_stage(states: Sequence[QueryState], variants: Sequence[str], run: _Run) -> None:
    """Stage 3: bootstrap tournaments, one batch per round across every running tournament
    (``full`` ranks stage 2's output, ``s1+s3`` all stage-1 candidates)."""
    config = run.config
    running_of: dict[tuple[str, int], tournament.Tournament] = {}
    for variant in (v for v in TOURNAMENT_VARIANTS if v in variants):
        for qi, state in enumerate(states):
            if run.lost(state, qi, variant):  # what the tournament would rank is not there
                continue
            pool = [p.chunk for p in state.kept] if variant == "full" else list(state.stage1.candidates)
            state.tournaments[variant] = running_of[(variant, qi)] = tournament.Tournament(
                pool, seed=f"{config.seed}:{state.query.id}:{variant}", top_k=config.k,
                max_rounds=config.max_rounds, stop_at=config.jaccard_stop, small=config.small_group,
                large=config.large_group, aggregation=config.aggregation, regroup=config.regroup,
                early_stop=config.early_stop,
            )
    while running := [key for key, t in running_of.items() if not t.finished]:
        plans = {key: running_of[key].plan_round() for key in running}
        jobs = [(key, group) for key in running for group in plans[key]]
        answers = run.ask(
            "tournament",
            [
                tournament.ranking_request(
                    states[qi].query.question, [(c, states[qi].shown(c, config)) for c in group],
                    config.budget("tournament"), raw=config.card_view == "raw",
                )
                for (_, qi), group in jobs
            ],
            [(f"tournament:{variant}", qi) for (variant, qi), _ in jobs],
            [partial(tournament.parse_listwise, ids=group) for _, group in jobs],
        )
        rankings: dict[tuple[str, int], list] = {key: [] for key in running}
        for (key, _), ranking in zip(jobs, answers):
            rankings[key].append(ranking)
        for key in running:
            running_of[key].record_round(rankings[key], plans[key])


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
    run = _Run(MeteredJudge(judge) if judge is not None else None, config)
    states = bm25_states(queries, config)
    result = RunResult([])
    if any(v in CARD_VARIANTS for v in variants):
        result.card_cost, result.distinct_chunks, result.spans_kept, result.spans_dropped = card_stage(states, run)
    if any(v in SCREENING_VARIANTS for v in variants):
        intent_stage(states, run)
    for state in states:
        state.quotas = intent.coverage_quotas(state.intent, state.query.question)
    if "llm" in variants:
        llm_stage(states, run)
    if any(v in SCREENING_VARIANTS for v in variants):
        screening_stage(states, run)
    tournament_stage(states, variants, run)
    result.results = [variant_result(state, qi, variant, run) for qi, state in enumerate(states) for variant in variants]
    for stage, stage_cost in (costs_by_stage(run.judge.costs) if run.judge else {}).items():
        run.counts.setdefault(stage, StageCount()).cost = stage_cost
    result.stages = run.counts
    return result


def _needs(state: QueryState, qi: int, variant: str) -> list[Hashable]:
    """The judge requests (by owner) a variant's ranking of one query depends on."""
    owners: list[Hashable] = []
    if variant == "llm":
        owners.append(("llm", qi))
    if variant in CARD_VARIANTS:
        owners += [("cards", key) for key in state.card_keys()]
    if variant in SCREENING_VARIANTS:
        owners += [("intent", qi), ("screening", qi)]
    if variant in TOURNAMENT_VARIANTS:
        owners.append((f"tournament:{variant}", qi))
    return owners


def variant_result(state: QueryState, qi: int, variant: str, run: _Run) -> VariantResult:
    """One variant's ranking of one query (its own order, then the rest in BM25 order), with
    its scores, cost, judge outcome and audit trace; no ranking and no scores when the judge
    failed a request it needed."""
    s1, q = state.stage1, state.query
    audit: dict[str, Any] = {
        "stage1": {
            "chunks": len(q.chunks),
            "candidates": list(s1.candidates),
            "bm25": {str(c): _score_of(s1.scores, c) for c in s1.candidates},
        }
    }
    cost = Cost()
    variance, measured = None, True
    t = state.tournaments.get(variant)
    outcome = run.outcome(_needs(state, qi, variant))
    if variant == "bm25":
        ranking = list(s1.order)
        why = {c: f"BM25 rank {state.bm25_rank[c]} (score {_score_of(s1.scores, c)})" for c in ranking}
    elif variant == "llm":
        head = state.named or []
        ranking = fill_ranking(head, s1.order)
        audit["llm"] = {"named": head, "parsed": state.named is not None}
        cost = run.cost([("llm", qi)])
        why = {c: f"named {i} of {len(head)} by the zero-shot judge" for i, c in enumerate(head, 1)}
    else:
        if variant in SCREENING_VARIANTS:
            audit["intent"] = state.intent
            audit["quotas"] = state.quotas
            audit["stage2"] = stage2_audit(state.groups, state.picks, state.kept)
            cost = cost + run.cost([("intent", qi), ("screening", qi)])
        if t is not None:
            audit["stage3"] = stage3_audit(t)
            cost = cost + run.cost([(f"tournament:{variant}", qi)])
            head = t.final_order()
            variance, measured = t.rank_variance(), t.variance_measured
        else:
            head = [p.chunk for p in state.kept]
        ranking = fill_ranking(head, s1.order)
        why = why_placed(head, state.kept if variant in SCREENING_VARIANTS else [], t)
    for c in ranking:
        why.setdefault(c, f"not placed by {variant}: BM25 order (rank {state.bm25_rank[c]})")
    with_cards = variant in CARD_VARIANTS
    cost_fields: Mapping[str, float] = cost.as_dict()
    if with_cards:
        cost_fields = {name: value + state.card_share[name] for name, value in cost_fields.items()}
    result = VariantResult(
        q.id, variant, ranking, audit, cost_fields, rank_variance=variance, variance_measured=measured,
        candidates=len(s1.candidates), survivors=len(state.kept) if variant in SCREENING_VARIANTS else None,
        judge=outcome, doc_type=q.doc_type, graded=q.qrel is not None,
    )
    if outcome.status == "failed":
        # the judge did not answer something this ranking needs: not a ranking of the method
        result.ranking, result.rank_variance = None, None
        audit["final"] = []
        return result
    audit["final"] = [
        {
            "rank": rank,
            "id": c,
            "why": why[c],
            **(
                {"card_matches": card_matches(state.cards[c], q.question, state.intent),
                 "card_source": state.cards[c]["source"]}
                if with_cards and c in state.cards else {}
            ),
        }
        for rank, c in enumerate(ranking[: run.config.k], start=1)
    ]
    if with_cards:
        audit["cards"] = {str(c): state.cards[c] for c in ranking[: run.config.k] if c in state.cards}
    if q.qrel is not None:
        result.scores = rank_metrics(ranking, q.qrel, run.config.k, gain=run.config.gain)
    return result
