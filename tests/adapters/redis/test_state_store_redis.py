"""The state-store contract against a real redis-server, plus what only Redis has (TTL, v1
values, one round trip per batch, claims sent before their answers are read, translated
errors), and a property test against ``decide``."""

from __future__ import annotations

import time
import uuid

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.redis import RedisStateStore
from domain import (
    Claim,
    Emission,
    Judgement,
    StateFormatError,
    StateUnavailable,
    decide,
    encode_key,
    encode_v1,
    encode_v2,
)
from tests.domain.ports.state_store_contract import StateStoreContract, claim, granted

pytestmark = pytest.mark.redis


def fresh_store(url: str, **options) -> RedisStateStore:
    """A store under a prefix no other test uses: empty, and no FLUSHDB needed."""
    return RedisStateStore(url, key_prefix=f"test:{uuid.uuid4().hex[:10]}:", **options)


class TestRedisStateStore(StateStoreContract):
    @pytest.fixture(autouse=True)
    def _redis(self, redis_url):
        self.url = redis_url
        self.store = self.make_store()
        self.raw = redis.Redis.from_url(redis_url)
        yield
        self.store.close()
        self.raw.close()

    def setup_method(self):
        """The store is built by ``_redis`` (it needs the session's redis URL)."""

    def teardown_method(self):
        """Closed by ``_redis``."""

    def make_store(self):
        return fresh_store(self.url)

    def reopen(self):
        return RedisStateStore(self.url, key_prefix=self.store.key_prefix)

    def stored_keys(self):
        return self.store.key_count()

    def test_values_are_v3_with_the_owner_and_no_wall_clock_ttl(self):
        self.store.check_and_set(claim("APP\x1fa", 100, owner="in:0:7"))
        key = self.store.key_prefix + "APP\x1fa"
        assert self.raw.get(key) == b"3|100,160,in%3A0%3A7"
        assert self.raw.pttl(key) == -1  # a stopped job forgets nothing: only the watermark does

    def test_a_batch_forgets_at_most_two_expired_keys_per_claim_and_later_batches_the_rest(self):
        self.store.check_and_set_many([claim(f"APP\x1fold{i}", 100 + i % 50, now=100) for i in range(1000)])
        self.store.check_and_set_many([claim(f"APP\x1fnew{i}", 10_000) for i in range(10)])
        assert self.stored_keys() == 1000 - 20 + 10
        counts = []
        for batch in range(6):
            self.store.check_and_set_many([claim(f"APP\x1fnew{batch}-{i}", 10_000) for i in range(100)])
            counts.append(self.stored_keys())
        assert counts == [890, 790, 690, 590, 510, 610]  # 200 old keys gone per batch of 100, until none is left

    def test_a_lagging_reader_of_other_partitions_holds_the_sweeps_back_until_it_goes_silent(self):
        """Instances of a group share the store, each with its own partitions' watermark."""
        # 1.5 s: the first writes below must follow each other within it on a busy machine
        lagging = RedisStateStore(self.url, key_prefix=self.store.key_prefix, idle_timeout=1.5)
        ahead = RedisStateStore(self.url, key_prefix=self.store.key_prefix, idle_timeout=1.5)
        try:
            lagging.check_and_set_many([claim(f"APP\x1fa{i}", 100, owner=f"t:0:{i}") for i in range(10)])
            ahead.check_and_set_many([claim(f"APP\x1fb{i}", 1000, owner=f"t:1:{i}") for i in range(10)])
            assert self.stored_keys() == 20  # partition 0 is read at 100: nothing it may meet is forgotten
            assert lagging.check_and_set(claim("APP\x1fa0", 120, owner="t:0:99")) is False
            time.sleep(1.6)  # partition 0's reader goes silent: it holds nothing back any more
            ahead.check_and_set_many([claim(f"APP\x1fc{i}", 1000, owner=f"t:1:{100 + i}") for i in range(10)])
            assert self.stored_keys() == 20  # a0…a9 forgotten (kept until 220), b and c kept
            assert not self.raw.exists(self.store.key_prefix + "APP\x1fa0")
        finally:
            lagging.close()
            ahead.close()

    def test_the_jobs_idle_partition_timeout_is_how_long_a_silent_reader_holds_the_sweeps_back(self, tmp_path):
        """The setting reaches the store the container builds (60 s by default would keep a0…a9)."""
        from app import container_for, load_settings

        url = self.url.rstrip("/").rsplit("/", 1)[0] if self.url.count("/") > 2 else self.url
        url = f"{url}/9"  # a database of its own: the container's store uses the default prefix
        redis.Redis.from_url(url).flushdb()
        settings = load_settings(
            engine="memory",
            source=f"file:{tmp_path / 'in.jsonl'}",
            sink=f"file:{tmp_path / 'out.jsonl'}",
            state=url,
            idle_partition_timeout="2s",  # the first two writes below must follow each other within it
        )
        ahead = container_for(settings).state_store()
        lagging = RedisStateStore(url, key_prefix=ahead.key_prefix)
        try:
            lagging.check_and_set_many([claim(f"APP\x1fa{i}", 100, owner=f"t:0:{i}") for i in range(10)])
            ahead.check_and_set_many([claim(f"APP\x1fb{i}", 1000, owner=f"t:1:{i}") for i in range(10)])
            assert ahead.key_count() == 20
            time.sleep(2.2)  # partition 0's reader silent for longer than the job's idle_partition_timeout
            ahead.check_and_set_many([claim(f"APP\x1fc{i}", 1000, owner=f"t:1:{100 + i}") for i in range(10)])
            assert ahead.key_count() == 20  # a0…a9 forgotten
        finally:
            lagging.close()
            ahead.close()

    def test_a_key_claimed_again_later_is_kept_until_its_newest_emission(self):
        assert self.store.check_and_set(claim("APP\x1fa", 100)) is True  # kept until 220
        assert self.store.check_and_set(claim("APP\x1fa", 150)) is True  # kept until 270
        self.store.check_and_set(claim("APP\x1fother", 230))  # the watermark passes the second it was first filed at
        assert self.raw.get(self.store.key_prefix + "APP\x1fa") == b"3|100,160,;150,210,"
        self.store.check_and_set(claim("APP\x1fother2", 270))
        assert not self.raw.exists(self.store.key_prefix + "APP\x1fa")

    def test_an_invalidated_key_leaves_nothing_for_the_sweep_to_trip_on(self):
        self.store.check_and_set_many([claim(f"APP\x1fk{i}", 100) for i in range(5)])
        assert self.store.invalidate("APP\x1fk0") is True
        again = [claim("APP\x1fk1", 400), claim("APP\x1fy", 400), claim("APP\x1fz", 400)]
        assert granted(self.store.check_and_set_many(again)) == [True] * 3
        assert self.stored_keys() == 3

    def test_the_expiry_index_is_not_counted_or_listed_as_state(self):
        self.store.check_and_set_many([claim("APP\x1fa", 100), claim("WEB\x1fb", 100)])
        assert any(
            key.startswith((self.store.key_prefix + "\x1f").encode())
            for key in self.raw.scan_iter(match=self.store.key_prefix + "*")
        )
        assert self.stored_keys() == 2
        assert sorted(key for key, _ in self.store.scan_items()) == ["APP\x1fa", "WEB\x1fb"]

    def test_a_v1_value_is_read_and_upgraded_on_the_next_write(self):
        key = self.store.key_prefix + "APP\x1fa"
        self.raw.set(key, encode_v1((Emission(100, 160),)))
        assert self.store.entries("APP\x1fa", now=100) == (Emission(100, 160, ""),)
        assert self.store.check_and_set(claim("APP\x1fa", 120)) is False
        assert self.store.check_and_set(claim("APP\x1fa", 130, owner="in:0:9")) is True
        assert self.raw.get(key) == b"3|100,160,;130,190,in%3A0%3A9"

    def test_a_v2_value_is_this_key_s_unless_its_legacy_spelling_differs(self):
        ordinary, escaped = encode_key("APP", ["a"]), encode_key("APP", ["b\x1e"])  # escaped: "APP\x1fb\x1e0"
        for key in (ordinary, escaped):
            self.raw.set(self.store.key_prefix + key, encode_v2((Emission(100, 160, "old:0:1"),)))
        assert self.store.check_and_set(claim(ordinary, 120)) is False  # the same key in both spellings
        # the v2 value at "APP\x1fb\x1e0" is legacy "b\x1e0"'s (now "b\x1e00"), not "b\x1e"'s: taken as none
        assert self.store.check_and_set(claim(escaped, 120, owner="in:0:9")) is True
        assert self.raw.get(self.store.key_prefix + escaped) == b"3|120,180,in%3A0%3A9"

    def test_an_unreadable_value_fails_the_batch_with_nothing_applied(self):
        self.raw.set(self.store.key_prefix + "APP\x1fbad", "9|what")
        with pytest.raises(StateFormatError, match="APP"):
            self.store.check_and_set_many([claim("APP\x1fgood", 100), claim("APP\x1fbad", 100)])
        assert self.store.entries("APP\x1fgood", now=100) == ()

    @pytest.mark.guard  # counts script calls: the latency of a batch is its round trips
    def test_a_batch_is_one_round_trip(self):
        claims = [claim(f"APP\x1fk{i % 50}", 100 + i, owner=f"in:0:{i}") for i in range(5000)]
        self.store.check_and_set(claim("APP\x1fwarm-up", 100))  # the script is loaded once per server
        before = self._command_calls()
        judged = self.store.check_and_set_many(claims)
        after = self._command_calls()
        assert after["evalsha"] - before["evalsha"] == 6  # chunks of 2000, a sweep and the claims each, one pipeline
        assert after["script"] == before["script"] and after["eval"] == before["eval"]
        assert judged == reference(claims)

    def test_a_script_flushed_from_the_server_is_loaded_again(self):
        self.raw.script_flush()
        assert granted(self.store.check_and_set_many([claim("APP\x1fa", 100), claim("APP\x1fa", 101)])) == [True, False]

    def test_a_chunked_batch_decides_repeated_keys_in_order(self):
        store = fresh_store(self.url, chunk_size=3)
        claims = [claim("APP\x1fa", t) for t in (100, 101, 129, 130, 131, 160, 161)]
        assert granted(store.check_and_set_many(claims)) == [True, False, False, True, False, True, False]

    def test_claims_sent_before_any_answer_is_read_are_decided_in_the_order_sent(self):
        claims = [claim(f"APP\x1fk{i % 7}", 100 + i, owner=f"in:0:{i}") for i in range(60)]
        answers = [self.store.send_many(claims[i : i + 13]) for i in range(0, len(claims), 13)]
        assert [j for answer in answers for j in answer()] == reference(claims)

    def test_an_answer_lost_with_its_connection_is_state_unavailable_and_claiming_again_decides_alike(self):
        claims = [claim(f"APP\x1fk{i % 5}", 100 + i, owner=f"in:0:{i}") for i in range(20)]
        self.store.check_and_set(claim("APP\x1fwarm-up", 100))
        self.raw.client_pause(10_000, all=False)  # writes (the script) wait, so no answer is on its way
        try:
            first, second = self.store.send_many(claims[:10]), self.store.send_many(claims[10:])
            self.raw.client_kill_filter(_type="normal", skipme=True)  # the store's connections, not this one
        finally:
            self.raw.client_unpause()
        for answer in (first, second):
            with pytest.raises(StateUnavailable, match="redis"):
                answer()
        assert self.store.check_and_set_many(claims) == reference(claims)
        assert self.store.send_many([claim("APP\x1fk0", 200, owner="in:0:99")])() == [Judgement()]

    def test_claims_sent_after_the_script_was_flushed_are_decided(self):
        self.store.check_and_set(claim("APP\x1fwarm-up", 100))
        self.raw.script_flush()
        answer = self.store.send_many([claim("APP\x1fa", 100), claim("APP\x1fa", 101)])
        assert granted(answer()) == [True, False]

    def test_key_prefix_keeps_stores_apart(self):
        other = fresh_store(self.url)
        assert self.store.check_and_set(claim("APP\x1fa", 100)) is True
        assert other.check_and_set(claim("APP\x1fa", 100)) is True
        assert self.store.key_count() == other.key_count() == 1

    def test_scan_items_lists_keys_without_the_prefix(self):
        self.store.check_and_set(claim("APP\x1fa", 100))
        self.store.check_and_set(claim("WEB\x1fb", 100))
        assert sorted(k for k, _ in self.store.scan_items()) == ["APP\x1fa", "WEB\x1fb"]

    def _command_calls(self) -> dict[str, int]:
        stats = self.raw.info("commandstats")
        script = sum(v["calls"] for k, v in stats.items() if k.startswith("cmdstat_script"))
        return {
            "evalsha": stats.get("cmdstat_evalsha", {}).get("calls", 0),
            "eval": stats.get("cmdstat_eval", {}).get("calls", 0),
            "script": script,
        }


def test_an_unreachable_server_is_state_unavailable_naming_it_without_the_password():
    store = RedisStateStore("redis://:s3cret@127.0.0.1:1/0", connect_timeout=0.5)
    with pytest.raises(StateUnavailable) as error:
        store.check_and_set(claim("APP\x1fa", 100))
    assert "redis unreachable at redis://127.0.0.1:1/0" in str(error.value)
    assert "s3cret" not in str(error.value)
    assert "\n" not in str(error.value)


def test_wrong_credentials_are_state_unavailable(redis_url):
    store = RedisStateStore(redis_url.replace("redis://", "redis://nobody:wrong@"))
    with pytest.raises(StateUnavailable, match="redis"):
        store.check_and_set(claim("APP\x1fa", 100))


# ---- property: the Lua script decides exactly like domain._state.decide

OWNERS = st.sampled_from(["", "in:0:1", "in:0:2", "a;b,c%:0:3"])
CLAIMS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.integers(0, 200),
        st.integers(1, 60),
        st.integers(0, 80),
        st.integers(-60, 80),
        OWNERS,
    ),
    min_size=1,
    max_size=30,
)


def reference(claims: list[Claim]) -> list[Judgement]:
    """The domain's judgements of ``claims``: granted, or the emission each repeats."""
    state: dict[str, tuple[Emission, ...]] = {}
    judgements = []
    for c in claims:
        decision = decide(state.get(c.key, ()), c)
        state[c.key] = decision.entries
        judgements.append(decision.judgement)
    return judgements


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=CLAIMS, split=st.integers(1, 30), chunk_size=st.integers(1, 8), sent=st.booleans())
def test_lua_decides_like_the_domain(redis_url, raw, split, chunk_size, sent):
    """Any claims, in two batches in chunks of any size (``sent``: both sent before either
    answer is read): the verdicts of ``decide``, each refusal naming the same emission.

    ``now`` never goes back (it is the rule's watermark): Redis forgets a key once every
    emission in it is dead, which only a watermark moving backwards could tell apart.
    """
    claims, now = [], 0
    for key, t, window, extra, shift, owner in raw:
        now = max(now, t + shift)
        claims.append(Claim(f"APP\x1f{key}", t, window, t + window + extra, now, owner))
    store = fresh_store(redis_url, chunk_size=chunk_size)
    try:
        if sent:
            first, second = store.send_many(claims[:split]), store.send_many(claims[split:])
            got = first() + second()
        else:
            got = store.check_and_set_many(claims[:split]) + store.check_and_set_many(claims[split:])
        assert got == reference(claims)
    finally:
        store.close()
