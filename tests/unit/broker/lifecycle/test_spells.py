"""The one spell memory (``broker.lifecycle.spells``): what it counts, and
that the pool watch and a deadline job's memory count alike from it."""

from __future__ import annotations

from broker.lifecycle.deadline import DeadlineTier
from broker.lifecycle.spells import MAX_SPELLS, Spells
from broker.lifecycle.tiers import PoolWatch

LOOKS = (True, True, False, False, False, True, False, False, True)


def test_a_spell_counts_once_its_start_was_watched() -> None:
    s = Spells().turned(False).watched(2.0)
    s = s.turned(True).watched(3.0)  # the first spell began before the watch
    assert (s.up, s.down) == ((), ())
    s = s.turned(False).watched(1.0).turned(False).watched(0.5)  # no change: one spell
    s = s.turned(True)
    assert (s.up, s.down) == ((3.0,), (1.5,))
    assert s.available is True and s.run_hours == 0.0 and s.seen_hours == 6.5


def test_the_spells_kept_are_the_latest() -> None:
    s = Spells().turned(True).watched(1.0)
    for i in range(2 * MAX_SPELLS + 3):
        s = s.turned(i % 2 == 0).watched(float(i))
    assert len(s.up) == len(s.down) == MAX_SPELLS
    assert s.down[-1] == 2 * MAX_SPELLS + 1  # the last spell without spot


def test_the_pool_watch_and_a_jobs_memory_count_the_same_spells() -> None:
    # Looks every half hour: the watch is told of a change at the look that
    # sees it; the job's memory folds each half hour in as the look sees it.
    watch = PoolWatch(Spells().turned(LOOKS[0]), 0.0)
    memory = DeadlineTier.start(None)
    for i, available in enumerate(LOOKS):
        watch.observe(available, 1800.0 * i)
        memory = DeadlineTier.observe(memory, available, 0.5)
    assert watch.spells.up == memory.spells.up == (0.5,)
    assert watch.spells.down == memory.spells.down == (1.5, 1.0)
    assert memory.losses == 2
