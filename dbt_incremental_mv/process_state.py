"""What one Python process keeps between refreshes: ``PROCESS``, the one ``ProcessState``
(a leaf: the metadata readers, the refresh and the adapter use it; it uses none of them).

dbt runs models on several threads of one process, and an orchestrator or a test suite may
invoke dbt many times in it; the embedded JVM lives as long as the process. Everything the
product remembers beyond one statement, one refresh or one dbt command is here, with why it may
be kept that long:

- ``parsed_metadata``: Iceberg table metadata parsed from its metadata file, by (table, metadata
  file, table uuid). Never stale: a metadata file is never rewritten, and the uuid tells apart a
  table dropped and created again under the same file names (a Hadoop catalog's v1, v2, ...).
- ``java_api``: whether a JVM's Iceberg has the Java API the metadata reader calls, by JVM.
  A JVM's classes do not change while it runs.
- ``session_start``: held while a dbt thread starts (or finds) the embedded Spark session, so
  that threads opening connections at once start one JVM.
- ``capture_locks``: one lock per change log, so that two dbt threads refreshing views of the
  same master capture its commits one after the other instead of racing and retrying (across
  processes the capture's compare-and-swap commit keeps a change from being appended twice).

Memos of pure functions (refresh/cost.py's parsed statements and calibration files) stay
``functools.lru_cache``s beside their functions: nothing a caller could observe changes with them.
What lives as long as one dbt command belongs to its adapter (the catalog's listing settings,
the refresh history kept until the command ends); what lives as long as one refresh, to its
``Refresh``. The embedded sessions' pool is the adapter's ``SESSIONS`` (adapter/session.py:
it needs PySpark, which this package's core does not import).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")

PARSED_METADATA_KEPT = 256  # table metadata documents: a few hundred KB each at most


class BoundedCache(Generic[Key, Value]):
    """A thread-safe cache of at most ``kept`` values, the oldest dropped first, for values that
    never go stale under their key (only their number is bounded)."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._values: OrderedDict[Key, Value] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_make(self, key: Key, make: Callable[[], Value]) -> Value:
        """The value kept under ``key``, else ``make()``'s, kept (made outside the lock: two
        threads may both make it; either value is right)."""
        with self._lock:
            value = self._values.get(key)
        if value is not None:
            return value
        value = make()
        with self._lock:
            if key not in self._values and len(self._values) >= self.kept:
                self._values.popitem(last=False)
            self._values[key] = value
        return value

    def __len__(self) -> int:
        return len(self._values)


class KeyedLocks:
    """One lock per key, made at its first use (a handful of change logs per process)."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def of(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


@dataclass(eq=False)
class ProcessState:
    """The process-wide state (module docstring)."""

    session_start: threading.Lock = field(default_factory=threading.Lock)
    parsed_metadata: BoundedCache = field(default_factory=lambda: BoundedCache(PARSED_METADATA_KEPT))
    java_api: dict[int, bool] = field(default_factory=dict)
    capture_locks: KeyedLocks = field(default_factory=KeyedLocks)


PROCESS = ProcessState()
