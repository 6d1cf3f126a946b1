"""The results of rule conditions, remembered across requests.

A rule's condition is cached under the rule and a digest of exactly the values it read, so a
segment or span unchanged since the last cycle is not evaluated again. The cache is shared by
every thread using the engine and bounded, so it is locked and evicts the least recently used.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from prunewarden.rules._model import DEFAULT_CACHE_SIZE


class ResultCache:
    """A bounded, thread-safe LRU map from (rule, digest of what it read) to its result."""

    def __init__(self, size: int = DEFAULT_CACHE_SIZE) -> None:
        self.size = size
        self._data: OrderedDict[tuple[Any, ...], bool] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[Any, ...]) -> bool | None:
        if self.size <= 0:
            return None
        with self._lock:
            found = self._data.get(key)
            if found is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: tuple[Any, ...], matched: bool) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._data[key] = matched
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)
