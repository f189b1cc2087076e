"""A processor's encoded Metadata topic entries, reused while what they were made from is unchanged.

librdkafka asks for the metadata of every topic it knows every few minutes and after
every error; with 10,000 partitions in a broker one such answer cost a processor
70-80 ms of CPU (a dict per partition, then the codec), during which its other
connections waited. A topic's entry (its error code, name, id and partitions) is the
same for every client until something it depends on changes, so each processor keeps
it encoded (`Message.encode_item`: the codec's own bytes, spliced into the response
array) and encodes it again only when it would differ.

What an entry depends on, and how a lookup sees that it changed (no per-request scan
of the partitions, no counter to keep in step elsewhere):

* the catalogue's entry (partition count, topic id, replicas per partition): compared
  by value (`assignment` is kept as a copy: the owner's catalogue grows in place);
* the cluster view's states of the topic's partitions (leader, leader epoch, ISR):
  the list the view holds for the topic, by identity and, after the view was re-read
  (`ViewReader`: a new object per cluster.json), by value, once;
* which brokers are live (a replica or leader outside them is offline): the view's
  broker ids, one frozenset per view; addresses are not in a topic's entry;
* which of this broker's log dirs are offline (`LogDirHealth.offline_slots`: nothing
  to read while every dir is online);
* the request's version: entries are kept per version asked.

Authorisation, auto-creation, pending and refused topics and by-id lookups are
decided per request by the handler; only the entry of an existing topic it answers
in full comes from here.

Memory bound: one basis per topic of the catalogue (the copy of its assignment, the
view's states list it was made with) and one encoded entry per version asked (about
26 bytes a partition at v12: 263,046 for 10,000 in docs/benchmarks.md); names no longer in the catalogue are dropped whenever the
cache holds more names than the catalogue (`prune`), so it never holds more than
the catalogue's topics x the versions clients use (at most 13).
"""

from __future__ import annotations

from typing import Callable

from mmlog.protocol.structs import Encoded


class _Basis:
    """What a topic's entries were encoded from, and the entries by version."""

    __slots__ = ("partitions", "topic_id", "assignment", "states", "live", "offline", "encoded")

    def __init__(self, info, states, live: frozenset, offline: tuple) -> None:
        self.partitions = info.partitions
        self.topic_id = info.topic_id
        self.assignment = None if info.assignment is None else [list(r) for r in info.assignment]
        self.states = states
        self.live = live
        self.offline = offline
        self.encoded: dict[int, Encoded] = {}

    def holds(self, info, states, live: frozenset, offline: tuple) -> bool:
        """Whether entries made from this basis are still the topic's (states taken as the newer object)."""
        if (self.partitions != info.partitions or self.topic_id != info.topic_id or self.offline != offline
                or self.live is not live or self.assignment != info.assignment):
            return False
        if self.states is not states:
            if self.states != states:
                return False
            self.states = states  # a re-read view with the same states: identity next time
        return True


class TopicEntries:
    """Encoded Metadata topic entries by topic name and version (one per processor)."""

    def __init__(self) -> None:
        self._topics: dict[str, _Basis] = {}
        self._view = None  # the view the live set was taken from
        self._live: frozenset = frozenset()

    def __len__(self) -> int:
        return len(self._topics)

    def live(self, view) -> frozenset:
        """The view's live broker ids, the same object while they do not change (compared by identity)."""
        if view is not self._view:
            live = frozenset(view.brokers)
            if live != self._live:
                self._live = live
            self._view = view
        return self._live

    def entry(self, name: str, info, view, offline: tuple, version: int,
              encode: Callable[[], Encoded]) -> Encoded:
        """The topic's entry for `version`: the one encoded before if nothing it depends on changed,
        else `encode()`'s, kept."""
        states = view.partitions.get(name)
        live = self.live(view)
        basis = self._topics.get(name)
        if basis is None or not basis.holds(info, states, live, offline):
            basis = self._topics[name] = _Basis(info, states, live, offline)
        found = basis.encoded.get(version)
        if found is None:
            found = basis.encoded[version] = encode()
        return found

    def prune(self, catalogue) -> None:
        """Drop topics the catalogue no longer names (deleted); a no-op while there are none to drop."""
        if len(self._topics) > len(catalogue):
            for name in [n for n in self._topics if n not in catalogue]:
                del self._topics[name]
