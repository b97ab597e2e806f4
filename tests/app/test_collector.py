"""``app._collector.long_lived_frozen``: the objects alive before the block stay out of the
collections made in it, young collections are rarer inside it, and both are given back after."""

import gc

from app import YOUNG_COLLECTION_AFTER, long_lived_frozen


def test_inside_the_block_the_survivors_are_frozen_and_young_collections_rarer_then_both_given_back():
    before = gc.get_threshold()
    kept = [object() for _ in range(10)]
    with long_lived_frozen():
        assert gc.get_freeze_count() > len(kept)
        assert gc.get_threshold() == (YOUNG_COLLECTION_AFTER, *before[1:])
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_an_error_in_the_block_gives_both_back_too():
    before = gc.get_threshold()
    try:
        with long_lived_frozen():
            raise RuntimeError("the engine failed")
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
