"""The hostile table's own statement holds in the domain core (the reference of every engine)."""

from tests.support.hostile import expected, hostile


def test_the_core_dead_letters_exactly_the_bad_records_with_their_reasons():
    table = hostile()
    emitted, dead = expected(table)
    assert dead == {value: reason for value, reason in table if reason}
    honest = [value for value, reason in table if reason is None]
    assert set(emitted) <= set(honest) and len(honest) - len(emitted) == 2  # h2 and y5, the duplicates
