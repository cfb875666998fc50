"""The embedded setup's archival journal (``pagefault.stores.writers.archival_journal``) survives a kill: a
process SIGKILLed after journalling an insert its writer never wrote loses nothing, and the next process to
open the directory writes it once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from pagefault import MemoryServices, Scope

CHILD = textwrap.dedent("""
    import sys, threading
    from pagefault import MemoryServices, Scope
    svc = MemoryServices.open(sys.argv[1])
    svc.archival.journal.apply = lambda *a: threading.Event().wait()  # the writer never writes
    rec = svc.archival.insert(Scope("ana"), "The boat Gaviota is moored in Denia.", defer=True)
    print(rec.id, flush=True)
    threading.Event().wait()
""")


def test_a_killed_process_loses_no_journalled_insert(data_dir):
    child = subprocess.Popen([sys.executable, "-c", CHILD, data_dir], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    try:
        rid = child.stdout.readline().strip()
        assert rid.startswith("arc-"), "the child journalled the insert"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    svc, scope = MemoryServices.open(data_dir), Scope("ana")  # a new process opens the directory
    assert svc.archival.count(scope) == 1
    assert [r.id for r, _ in svc.archival.search(scope, "boat Gaviota", 3)] == [rid]
    assert svc.archival.count(scope) == 1 and not svc.archival.journal.is_pending(rid)
