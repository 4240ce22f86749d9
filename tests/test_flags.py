"""One flag style for every command: snake_case shown, the old kebab-case spellings still taken;
help lists only what a command uses, defaults written one way."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from lm_eval_fin import cli
from lm_eval_fin.plumbing.flags import spellings

BIN = Path(sys.executable).parent


def help_of(command: str) -> str:
    parser = cli.build_parser()
    sub = next(action for action in parser._actions if action.dest == "command").choices[command]
    return sub.format_help()


@pytest.mark.parametrize("command", ["score", "build", "rerank", "report", "export", "agreement", "doctor"])
def test_help_shows_snake_case_only_and_defaults_one_way(command):
    text = help_of(command)
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9_-]*", text))
    assert flags and not [flag for flag in flags if "-" in flag[2:]], sorted(flags)
    assert not re.search(r"\((?:default )?\d[\w.]*\)|\(default [^:]", text), text  # "(1024)", "(default 2000)"
    assert ("--judge" in flags) == (command in ("score", "build", "rerank", "doctor"))


def test_old_spellings_stay_accepted():
    args = cli.build_parser().parse_args(["rerank", "--data", "x", "--doc-types", "10-K", "--judge-max-tokens", "7",
                                          "--card-view", "summary"])
    assert args.doc_types == ("10-K",) and args.judge_max_tokens == 7 and args.card_view == "summary"
    same = cli.build_parser().parse_args(["rerank", "--data", "x", "--doc_types", "10-K", "--judge_max_tokens", "7",
                                          "--card_view", "summary"])
    assert (same.doc_types, same.judge_max_tokens, same.card_view) == (args.doc_types, 7, "summary")


def test_errors_name_the_snake_case_spelling():
    parser = cli.build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["score", "out", "--judge_repeat", "two"])
    with pytest.raises(SystemExit):
        parser.parse_args(["score", "out", "--judge-repeat", "two"])


def test_a_flag_is_declared_in_snake_case():
    assert spellings("--judge_seed") == ("--judge_seed", "--judge-seed")
    with pytest.raises(ValueError, match="--snake_case"):
        spellings("--judge-seed")


def test_run_help_and_a_mistyped_judge_flag():
    done = subprocess.run([BIN / "lm-eval-fin", "run", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "--judge_max_tokens" in done.stdout and "--judge-max-tokens" not in done.stdout
    done = subprocess.run([BIN / "lm-eval-fin", "run", "--judge_sed", "3", "--tasks", "fin_ems"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "did you mean --judge_seed?" in done.stderr
