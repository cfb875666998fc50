"""The order the test files start in (``tests/conftest.py`` sorts the collected tests by it)."""

from __future__ import annotations

#: The test files that take longest (tens of seconds to minutes, mostly waiting on child processes), longest
#: first, measured on the default command. They run first, so that the workers (``-n 4 --dist loadfile``
#: hands out whole files in collection order) finish together rather than one of them starting a long file
#: at the end. Only the order changes: a file missing here still runs, after these.
LONGEST_FIRST = (
    "integration/test_clean_exit.py",
    "integration/test_killed_turn.py",
    "integration/test_multiprocess.py",
    "integration/test_write_bounds.py",
    "integration/test_replicas.py",
    "integration/test_transfer.py",
    "server/test_serve_safely.py",
    "integration/test_readme_claims.py",
    "unit/window/test_compaction_property.py",
    "integration/test_crash.py",
    "integration/test_notebooks.py",
    "integration/test_reindex.py",
    "integration/test_memory_graph.py",
    "benchmarks/test_perf_benchmarks.py",
    "project/test_static_checks.py",
    "integration/test_fuzz_inputs.py",
    "integration/test_checkpoint_history.py",
    "integration/test_bad_environments.py",
)
