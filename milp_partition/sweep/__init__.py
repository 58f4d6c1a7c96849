"""Sweeps of heuristics against the exact solvers (``milp-partition gap``), problem by problem.

:mod:`.registry` maps a problem name to its gap module (``milp_partition.<problem>.gap``);
:mod:`.grid` expands the settings grid; :mod:`.jobs` defines one run and the CSV rows;
:mod:`.executors` runs jobs in local processes or on Ray, with progress on stderr;
:mod:`.markdown` and :mod:`.charts` turn the rows into tables and plots.
"""
