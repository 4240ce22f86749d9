"""Exit statuses of every ``lm-eval-fin`` command, one meaning each (README, "Exit status").

A judge failure is never a score: a command that finished but left work unjudged says so in
its status, after it has written what it could.
"""

OK = 0
# finished and wrote its results, but some of the work is missing from them: the judge failed
# on (or could not read) some of it, some runs could not be read, a needed part is absent
INCOMPLETE = 1
USAGE = 2  # did not start: bad arguments, data, settings or judge configuration (one line says which)
JUDGE_CACHE = 3  # the judge cache cannot be used (the message names the file and the fix)
