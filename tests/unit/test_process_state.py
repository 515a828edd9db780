"""The process-wide state (process_state.py): a bounded cache that drops its oldest value and
makes a value once per key, and one lock per key."""

import threading

from dbt_incremental_mv.process_state import BoundedCache, KeyedLocks


def test_the_cache_makes_a_value_once_and_drops_the_oldest_past_its_bound():
    cache = BoundedCache(kept=2)
    made = []

    def make(value):
        return lambda: made.append(value) or value

    assert cache.get_or_make("a", make(1)) == 1
    assert cache.get_or_make("a", make(99)) == 1  # kept: not made again
    cache.get_or_make("b", make(2))
    cache.get_or_make("c", make(3))  # the third: "a", the oldest, goes
    assert len(cache) == 2
    assert cache.get_or_make("a", make(4)) == 4
    assert made == [1, 2, 3, 4]


def test_one_lock_per_key_the_same_every_time():
    locks = KeyedLocks()
    assert locks.of("db.orders_log") is locks.of("db.orders_log")
    assert locks.of("db.orders_log") is not locks.of("db.customers_log")
    assert isinstance(locks.of("x"), type(threading.Lock()))
