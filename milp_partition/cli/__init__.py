"""Command-line interface: ``milp-partition SUBCOMMAND ...``.

:mod:`milp_partition.cli.dispatch` builds the parser and dispatches; each problem
and each further subcommand has its own module here.
"""

from milp_partition.cli.dispatch import main

__all__ = ["main"]
