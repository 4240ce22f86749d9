"""Adapters between lm-eval and lm_eval_fin.finlfqa (all logic lives there)."""

import datasets

from lm_eval_fin import finlfqa


def _load(split, data_path=None, index_base=finlfqa.DEFAULT_INDEX_BASE, **metadata):
    # the judge spec and options (metadata or environment) are checked here, so a bad one
    # stops the run before generation, not after it
    scoring = finlfqa.scoring_settings(metadata)
    documents = finlfqa.load_documents(split, data_path, index_base, scoring)
    return {split: datasets.Dataset.from_list(documents)}


def load_validation(**metadata):
    return _load("validation", **metadata)


def load_test(**metadata):
    return _load("test", **metadata)


def doc_to_text(doc):
    return finlfqa.build_prompt(doc)


def doc_to_target(doc):
    return finlfqa.render_answer(finlfqa.reference_clauses(doc))


def process_results(doc, results):
    return finlfqa.score_document(doc, results[0])


code_exec_rate = finlfqa.code_exec_rate
bertscore_f1 = finlfqa.bertscore_f1
judge_score = finlfqa.judge_metric("judge_score")
judge_accuracy = finlfqa.judge_metric("judge_accuracy")
judge_numerical = finlfqa.judge_metric("judge_numerical")
judge_entailment = finlfqa.judge_metric("judge_entailment")
judge_parse_failure = finlfqa.judge_metric("judge_parse_failure")
judge_failure = finlfqa.judge_metric("judge_failure")
judge_skipped = finlfqa.judge_metric("judge_skipped")
