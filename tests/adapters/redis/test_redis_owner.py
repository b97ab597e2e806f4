"""The Redis store quotes an emission's owner exactly as ``urllib.parse.quote`` does."""

from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.redis import quoted_owner

_parts = st.text(alphabet=st.sampled_from(["a", "-", ":", "/", "%", " ", "é", "\ud800", "1", "²", "٣"]), max_size=6)


@settings(max_examples=500, deadline=None)
@given(_parts, st.one_of(st.integers(min_value=0, max_value=10**12).map(str), _parts))
def test_a_quoted_owner_is_the_whole_owner_quoted(head, tail):
    for owner in (f"{head}:{tail}", f"{head}:0:{tail}", head, tail):
        assert quoted_owner(owner) == quote(owner, safe="", errors="surrogatepass")


def test_source_positions_are_quoted_as_before():
    assert quoted_owner("in-topic:3:1234") == "in-topic%3A3%3A1234"
    assert quoted_owner("/data/in/part-0.jsonl:0:17") == "%2Fdata%2Fin%2Fpart-0.jsonl%3A0%3A17"
