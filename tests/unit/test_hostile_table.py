"""The hostile table's own statement holds in the domain core (the reference of every engine)."""

from tests.hostile import HOSTILE, expected


def test_the_core_dead_letters_exactly_the_bad_records_with_their_reasons():
    emitted, dead = expected()
    assert dead == {value: reason for value, reason in HOSTILE if reason}
    honest = [value for value, reason in HOSTILE if reason is None]
    assert set(emitted) <= set(honest) and len(honest) - len(emitted) == 1  # h2, the one duplicate
