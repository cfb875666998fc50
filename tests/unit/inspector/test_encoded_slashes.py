"""The path the inspector routes on (``pagefault.inspector.segments``): an encoded ``/`` stays in its
segment, and the route's parameters come back as the client meant them. The pages themselves, for a
user whose token ``sub`` is ``team/ana``, are in tests/server/test_inspector_served.py."""

from __future__ import annotations

from urllib.parse import quote, unquote

import pytest

from pagefault.inspector.layout import user_path
from pagefault.inspector.segments import routed_path
from pagefault.stores import Scope


@pytest.mark.parametrize("user", ["ann", "team/ana", "a/b/c", "50%off", "ana maria", "ü/ß", "%2F", "x%252Fy"])
def test_every_user_id_is_one_segment_and_comes_back_whole(user):
    sent = user_path(Scope(user), "core")  # what a page links to, as a client sends it
    routed = routed_path(sent.encode("ascii"), unquote(sent))
    root, name, segment, section = routed.split("/")
    assert (root, name, section) == ("", "inspector", "core"), routed
    assert unquote(segment) == user


def test_a_path_sent_with_plain_slashes_stays_several_segments():
    assert routed_path(b"/inspector/team/ana/core", "/inspector/team/ana/core") == "/inspector/team/ana/core"


def test_without_a_raw_path_the_decoded_one_is_escaped_the_same_way():
    assert routed_path(None, "/inspector/50%off/core") == "/inspector/50%25off/core"
    # A raw path that does not decode to the path given is not trusted over it.
    assert routed_path(b"/elsewhere", "/inspector/ann/core") == "/inspector/ann/core"


def test_the_query_string_is_no_part_of_the_route():
    raw = f"/inspector/{quote('team/ana', safe='')}/archival?q=a%2Fb".encode()
    assert routed_path(raw, "/inspector/team/ana/archival") == "/inspector/team%2Fana/archival"
