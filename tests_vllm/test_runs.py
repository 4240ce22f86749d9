"""lm-eval's ``--model vllm`` through ``lm-eval-fin run`` (the real CLI, a child process per run,
see runs.py) on every benchmark with the embedded SmolLM2-135M on CPU: metrics present and in
range; fin_ems judged by a ``vllm:`` judge in the process of the model under test (offline EMS
is the light suite's: it does not depend on the model's backend);
fin_lfqa judged in-harness with vLLM's engine processes. One engine in memory at a time, by
the logs, the memory and the processes. A 135M model ranks and answers badly: these tests
check that the pieces run and report sane figures, not the model's quality."""

from __future__ import annotations

import json

from tests.logged_runs import ems_judge_usage
from tests_vllm import figures
from tests_vllm.runs import check_judged_ems, in_unit_range, results_of

GIB = 2**30


def record_run(name: str, run, memory: str = "") -> None:
    figures.record(f"run {name}: wall (s)", f"{run.wall_s:.0f}")
    if memory:
        figures.record(f"run {name}: peak RSS (GiB)", memory)
    starts = figures.engine_starts(run.output)
    figures.record(f"run {name}: engine starts, vLLM's log (s)", ", ".join(f"{s:.0f}" for s in starts))
    judge_starts = figures.judge_engine_starts(run.stderr)
    if judge_starts:
        figures.record(f"run {name}: judge engine start, LLM() call (s)", ", ".join(f"{s:.1f}" for s in judge_starts))


def test_fin_ems_judged_in_harness_holds_one_engine_at_a_time(runs):
    run = runs.result("ems_judged")
    assert run.returncode in (0, 1), run.stderr[-5000:]
    record_run("ems_judged", run, f"{run.max_rss / GIB:.2f} (model engine, then judge engine, in-process)")
    results = results_of(runs.output("ems_judged"), "fin_ems")
    in_unit_range(results, "bleu", "bertscore_f1")
    unjudged = check_judged_ems(results)
    figures.record("run ems_judged: documents left unjudged", f"{unjudged:.2f}")
    # documents the judge left unjudged make the command fail, after lm-eval wrote its results
    assert run.returncode == (1 if unjudged else 0), run.stderr[-3000:]
    ((_, usage),) = ems_judge_usage(run.stderr)
    assert usage["model_calls"] > 0 and usage["completion_tokens"] > 0
    # the judge engine starts once, after the model under test's engine was shut down, and is
    # released before the process ends
    log = run.stderr
    assert log.count("vLLM judge: starting an engine") == 1
    parked = log.index("shut down the engine of the model under test")
    assert parked < log.index("vLLM judge: starting an engine") < log.index("vLLM judge: released the engine")
    # the memory says the same: this run's peak is that of a run of the same engine without a
    # judge (fin_agentbench) plus less than one engine (a 1 GiB KV cache and 0.5 GiB of float32
    # weights), not plus a second one
    alone = runs.result("agentbench").check()
    assert run.max_rss - alone.max_rss < 1 * GIB, (run.max_rss / GIB, alone.max_rss / GIB)


def test_fin_lfqa_judged_in_harness_with_engine_processes(runs):
    """vLLM's default: each engine in processes of its own. At most one engine-core process is
    alive at any time, two were started (model, judge), and none outlives the run."""
    run = runs.result("lfqa_judged").check()
    record_run("lfqa_judged", run, f"{run.tree_rss_peak / GIB:.2f} (engine processes: sum over the tree, sampled)")
    results = results_of(runs.output("lfqa_judged"), "fin_lfqa")
    in_unit_range(results, "numeric_f1", "evidence_f1", "rouge_l", "bertscore_f1", "parse_failure",
                  "judge_parse_failure")
    # absent where no answer wrote code, or no reference cites knowledge (no document defines it)
    for metric in ("code_exec_rate", "knowledge_recall"):
        value = results.get(f"{metric},none")
        assert value is None or 0.0 <= value <= 1.0, metric
    assert (results["judge_skipped,none"], results["judge_failure,none"]) == (0.0, 0.0)
    # the judge's JSON schema is enforced, so every verdict parses: three scores of 1..5
    assert results["judge_parse_failure,none"] == 0.0
    assert 3.0 <= results["judge_score,none"] <= 15.0
    assert (run.engine_cores_peak, len(run.engine_cores_seen)) == (1, 2)
    assert run.leftovers == []


def test_fin_agentbench_doc_and_chunk(runs):
    run = runs.result("agentbench").check()
    record_run("agentbench", run, f"{run.max_rss / GIB:.2f} (one engine, in-process)")
    out = runs.output("agentbench")
    assert "Initializing a V1 LLM engine" in run.output
    in_unit_range(results_of(out, "fin_agentbench_doc"), "ndcg@5", "map@5", "mrr@5", "parse_failure")
    in_unit_range(results_of(out, "fin_agentbench_chunk"), "ndcg@10", "map@10", "mrr@10", "parse_failure")
    for task in ("fin_agentbench_doc", "fin_agentbench_chunk"):
        samples = [json.loads(line) for line in next(out.rglob(f"samples_{task}_*.jsonl")).read_text().splitlines()]
        assert len(samples) == 2 and all(isinstance(s["resps"][0][0], str) for s in samples)
