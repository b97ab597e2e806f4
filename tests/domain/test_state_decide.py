"""``domain._state.decide_one``, the one-emission form of ``decide`` a store keeping tuples uses,
decides as ``decide`` does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from domain import Claim, Emission, decide, decide_one

OWNERS = st.sampled_from(["", "in:0:1", "in:0:2"])


@settings(max_examples=500)
@given(
    time=st.integers(0, 200),
    life=st.integers(0, 80),
    owner=OWNERS,
    apart=st.integers(-62, 62),
    window=st.integers(1, 60),
    extra=st.integers(0, 80),
    now=st.integers(0, 400),
    claimant=OWNERS,
)
def test_decide_one_decides_as_decide(time, life, owner, apart, window, extra, now, claimant):
    """Any one emission and claim (``apart``: the claim's time minus the emission's, around the
    window's edges)."""
    stored, t = (time, time + life, owner), time + apart
    claim = Claim("APP\x1fk", t, window, t + window + extra, now, claimant)
    decision = decide((Emission(*stored),), claim)
    judgement, entries = decide_one(stored, claim)
    assert judgement == decision.judgement
    want = tuple((e.time, e.expires_at, e.owner) for e in decision.entries) if decision.changed else None
    assert entries == want
