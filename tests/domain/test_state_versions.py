"""State format versions: every earlier version is read and upgraded; migrations fall back to the old state."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.memory import InMemoryStateStore
from domain import (
    CURRENT_VERSION,
    Claim,
    Emission,
    KeyTranslation,
    MigratingStateStore,
    StateFormatError,
    decode,
    encode,
    encode_v1,
    encode_v2,
    version_of,
)


@pytest.mark.parametrize("encoder", [encode, encode_v2])
def test_v3_and_v2_round_trip_with_owners_holding_separators(encoder):
    entries = (Emission(100, 160, "t:0:1"), Emission(140, 200, "a,b;c|d:0:2"))
    assert version_of(encode(entries)) == CURRENT_VERSION == 3
    assert decode(encoder(entries)) == entries


@given(st.lists(st.tuples(st.text(), st.integers(0, 99)), min_size=1, max_size=3))
def test_owners_of_any_text_round_trip(owners):
    """Any owner, a position (``head:offset``) or not, holding ``%``, ``:`` or lone surrogates,
    is read back as written (positions' heads are decoded through a cache)."""
    entries = tuple(Emission(1, 2, f"{head}:{offset}" if offset % 2 else head) for head, offset in owners)
    assert decode(encode(entries)) == entries
    assert decode(encode(entries)) == entries  # the cached heads answer the same


def test_v1_is_read_and_upgraded():
    old = encode_v1((Emission(100, 160),))
    assert old == "1|100,160"
    upgraded = decode(old)
    assert upgraded == (Emission(100, 160, ""),)
    assert version_of(encode(upgraded)) == 3


@pytest.mark.parametrize("value", ["9|1,2", "garbage", "2|1,2", "1|x,y"])
def test_unreadable_values_raise_a_format_error(value):
    with pytest.raises(StateFormatError):
        decode(value)


def claim(key, t, now=None, owner=""):
    return Claim(key, t, 30, t + 60, t if now is None else now, owner)


def test_migration_consults_the_old_state_until_it_expires_and_writes_only_the_new():
    old, new = InMemoryStateStore(), InMemoryStateStore()
    old.check_and_set(claim("APP\x1fa", 100))
    migrating = MigratingStateStore(new, old, retention=60)
    assert migrating.check_and_set(claim("APP\x1fa", 110)) is False  # first seen by the old job
    assert new.entries("APP\x1fa", 110) == ()  # nothing written for a duplicate
    assert migrating.check_and_set(claim("APP\x1fb", 110)) is True
    assert [e.time for e in new.entries("APP\x1fb", 110)] == [110]
    assert migrating.check_and_set(claim("APP\x1fa", 171)) is True  # old window and retention passed
    assert migrating.retired


def test_migration_translates_a_changed_key_layout():
    old, new = InMemoryStateStore(), InMemoryStateStore()
    old.check_and_set(claim("WEB\x1fu1", 100))
    translation = KeyTranslation(("uniqueValue",), ("uniqueValue", "type"))
    migrating = MigratingStateStore(new, old, retention=60, translations={"WEB": translation})
    assert migrating.check_and_set(claim("WEB\x1fu1\x1fWEB", 105)) is False
    assert migrating.check_and_set(claim("WEB\x1fu2\x1fWEB", 105)) is True


def test_a_key_change_that_drops_old_fields_is_refused():
    with pytest.raises(ValueError, match="old key field"):
        KeyTranslation(("uniqueValue", "id"), ("uniqueValue",))
