"""The memory tool surface: argument schemas and handlers (``handlers``), the trust of the text a
call writes (``trust``), and human approval of untrusted core edits (``approval``)."""
