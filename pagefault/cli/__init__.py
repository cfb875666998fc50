"""The ``pagefault`` command: one module per command, the entry point in ``main``."""
