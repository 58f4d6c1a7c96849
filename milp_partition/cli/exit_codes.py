"""Exit codes of ``milp-partition``, defined once.

=====  ==========================================================================
code   meaning
=====  ==========================================================================
0      a verified solution (optimal or feasible), or a command that succeeded
1      internal error (e.g. the verifier rejected a solver's answer: a bug)
2      bad input or usage (one line on stderr, never a traceback)
3      proven infeasible (an instance with no solution, or a solution that
       breaks a constraint under ``evaluate``)
4      no solution found within the limits
130    interrupted (SIGINT or SIGTERM); the best verified answer so far is
       written and printed first when there is one
=====  ==========================================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INPUT = 2
EXIT_INFEASIBLE = 3
EXIT_NO_SOLUTION = 4
EXIT_INTERRUPTED = 130

#: Exit code of a solve by the status of its result.
_BY_STATUS = {"optimal": EXIT_OK, "feasible": EXIT_OK, "infeasible": EXIT_INFEASIBLE, "unknown": EXIT_NO_SOLUTION}


def exit_code_for_status(status: str) -> int:
    """The exit code of a solve that ended with ``status`` (an unknown status is an internal error)."""
    return _BY_STATUS.get(status, EXIT_ERROR)
