"""A judge run to kill half way (test_judge_backend): ``judge_child.py SPEC OPTIONS_JSON CONTENTS_JSON``
sends one batch, a user message per content, with the same system prompt as the test."""

import json
import sys

from lm_eval_fin.judge import JudgeOptions, JudgeRequest, load_judge

SYSTEM = {"role": "system", "content": "You grade answers about company filings."}

if __name__ == "__main__":  # vLLM may spawn processes that import this file
    spec, options, contents = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    judge = load_judge(spec, JudgeOptions(**options))
    judge.complete([JudgeRequest(messages=(SYSTEM, {"role": "user", "content": c})) for c in contents])
    print("the batch finished before the kill", flush=True)
