"""A fluid FIFO queue: arrivals spread evenly over each second, served at the pool's rate, waits recorded."""

from collections import deque

import numpy as np


class FluidQueue:
    """One class's queue and the waits (enqueue to start) of every message it served.

    Between two ticks the pool's service rate is constant, so the fluid model is exact for it:
    the wait of every message is linear in its position within a bucket of arrivals.
    """

    def __init__(self, capacity=None, track_starts=False):
        # Each bucket is [first arrival, last arrival, messages, the second they arrived in]; uniform in between.
        self._buckets = deque()
        self.depth = 0.0
        self.capacity = capacity
        self.refused = 0.0
        self._zero_waits = 0.0
        self._waits = []  # (messages, wait of the first, wait of the last)
        # With track_starts: (arrival second, messages, start of the first, start of the last), to tell how late the
        # messages of given seconds started (a scheduled send's lateness: sluice_tools.autoscale.lateness).
        self.starts = [] if track_starts else None

    def _started(self, origin, count, first, last):
        if self.starts is not None and count > 0:
            self.starts.append((origin, count, first, last))

    def _record(self, count, first, last):
        if count <= 0:
            return
        if first <= 1e-9 and last <= 1e-9:
            self._zero_waits += count
        else:
            self._waits.append((count, max(first, 0.0), max(last, 0.0)))

    def oldest_age(self, now):
        """Queue latency as the exporter reports it: the age of the oldest waiting message."""
        return now - self._buckets[0][0] if self._buckets else 0.0

    def tick(self, second, arrivals, rate):
        """Admit ``arrivals`` spread over [second, second + 1) and serve at ``rate`` messages/s."""
        if self.capacity is not None:
            # The admission bound: what does not fit is folded, collapsed or rejected, never queued.
            room = max(self.capacity - self.depth, 0.0)
            self.refused += max(arrivals - room, 0.0)
            arrivals = min(arrivals, room)
        budget = rate  # messages the pool can start during this second
        clock = float(second)
        while self._buckets and budget > 1e-12:
            first, last, n, origin = self._buckets[0]
            k = min(n, budget)
            served_last = first + (last - first) * k / n
            end = clock + k / rate
            self._record(k, clock - first, end - served_last)
            self._started(origin, k, clock, end)
            clock, budget, self.depth = end, budget - k, self.depth - k
            if k >= n - 1e-9:
                self._buckets.popleft()
            else:
                self._buckets[0] = [served_last, last, n - k, origin]
        if arrivals <= 0:
            return
        self.depth += arrivals
        if self._buckets or rate <= 0:
            self._buckets.append([float(second), second + 1.0, float(arrivals), second])
            return
        free_at = clock - second  # when, within this second, the pool is free for new arrivals
        if arrivals < rate:
            catch_up = rate * free_at / (rate - arrivals)
            if catch_up < 1.0:
                early = arrivals * catch_up
                self._record(early, free_at, 0.0)
                self._record(arrivals - early, 0.0, 0.0)
                # Those that came while the pool was busy start as it frees up; the rest as they arrive.
                self._started(second, early, clock, second + catch_up)
                self._started(second, arrivals - early, second + catch_up, second + 1.0)
                self.depth -= arrivals
                return
        k = min(rate * (1.0 - free_at), arrivals)
        self._record(k, free_at, 1.0 - k / arrivals)
        self._started(second, k, clock, second + 1.0)
        self.depth -= k
        if arrivals - k > 1e-9:
            self._buckets.append([second + k / arrivals, second + 1.0, arrivals - k, second])

    def served(self):
        """How many messages were started."""
        return self._zero_waits + sum(c for c, _, _ in self._waits)

    def percentile(self, q):
        """The q-th percentile (0-100) of the waits of the messages served so far, in seconds."""
        total = self.served()
        if total <= 0:
            return 0.0
        if not self._waits:
            return 0.0
        counts, first, last = (np.array(col, dtype=float) for col in zip(*self._waits, strict=True))
        # Each bucket's waits are uniform between its first and last: four points represent it.
        points = np.concatenate([first + (last - first) * (i + 0.5) / 4 for i in range(4)])
        weights = np.concatenate([counts / 4] * 4)
        order = np.argsort(points)
        points, weights = points[order], weights[order]
        cumulative = self._zero_waits + np.cumsum(weights)
        rank = total * q / 100.0
        if rank <= self._zero_waits:
            return 0.0
        index = int(np.searchsorted(cumulative, rank))
        return float(points[min(index, len(points) - 1)])
