"""The CLI's ``/context`` (and the demo's bars) measure the main context as the reason node sends it."""

from __future__ import annotations

import io

from pagefault import Context, open_embedded
from pagefault.cli.main import Session


def test_cli_context_counts_what_the_model_is_sent(tmp_path):
    """/context measures the same segments the reason node sent, procedures included."""
    with open_embedded(str(tmp_path / "pf")) as p:
        ctx = Context(user_id="ana", data_dir=str(tmp_path / "pf"))
        s = Session(p, ctx, "t-context", out=io.StringIO())
        s.say("Always answer in French.")
        s.say("My name is Ana.")
        sent = s.state()["tokens"]  # what the last model call was sent, by segment
        shown = s.context_tokens()
        assert sent["procedures"] > 0, sent
        for segment in ("system", "core", "procedures", "summary", "tools"):
            assert shown[segment] == sent[segment], (segment, shown, sent)
