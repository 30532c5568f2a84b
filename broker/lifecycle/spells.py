"""The spells of spot one pool was watched to have and not have.

Owns ``Spells``: the completed spells (hours) with spot (``up``) and without
(``down``), oldest first, the current spell's state and age, and the hours
watched. Two steps move it: ``watched`` (time passes in the current spell)
and ``turned`` (spot seen available or not now; a change closes the current
spell). A spell already in progress when the watch began is not counted.
The lifecycle's pool watch (``broker.lifecycle.tiers``) and each deadline
job's memory (``broker.lifecycle.deadline.TierMemory``) are this value.

Must not: estimate anything from the spells (the deadline rule does), read
a clock (callers give the hours) or do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from policies.online.deadline import EPS

__all__ = ["MAX_SPELLS", "Spells"]

# Spell lengths are judged on every spell watched (heavy tails: a few recent
# ones say little of the next); the cap only bounds memory.
MAX_SPELLS = 512


@dataclass(frozen=True, slots=True)
class Spells:
    """A pool's spells as watched (module docstring); ``available`` is
    ``None`` until the first look."""

    up: tuple[float, ...] = ()
    down: tuple[float, ...] = ()
    available: bool | None = None
    run_hours: float = 0.0  # the current spell's age
    seen_hours: float = 0.0

    def watched(self, hours: float) -> Spells:
        """``hours`` more of the current spell."""
        return replace(self, run_hours=self.run_hours + hours, seen_hours=self.seen_hours + hours)

    def turned(self, available: bool) -> Spells:
        """Spot seen ``available`` (or not) now: a change ends the current
        spell (counted if the watch saw it begin) and starts a new one."""
        if self.available is None:
            return replace(self, available=available)
        if available == self.available:
            return self
        up, down = self.up, self.down
        if self.run_hours < self.seen_hours - EPS:  # we saw the spell begin
            if self.available:
                up = (*up, self.run_hours)[-MAX_SPELLS:]
            else:
                down = (*down, self.run_hours)[-MAX_SPELLS:]
        return replace(self, up=up, down=down, available=available, run_hours=0.0)
