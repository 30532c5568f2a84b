"""Checkpoint hooks called at notice time, and their results stored later.

Owns: ``HookCalls``. ``call`` starts the configured hook of a revoked
instance's workload on a ``HookRunner`` thread (``broker.daemon.hooks``),
with what the lifecycle left of the notice window as its budget
(``CheckpointVerdict.hook_budget_s``), and returns at once: the decision
path never waits for a checkpoint. The results are written to the store
(``hook_results``) by ``drain``, on the daemon's own thread at its next
poll, reconcile or stop, so the store is never written from two threads.
What is stored and logged is the result's redacted detail and status
(``broker.daemon.hooks``: never a reply's body, never a resolved secret).

Must not: decide anything (the lifecycle does), block on a hook except in
``shutdown``, or write the store from a hook thread.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Mapping
from concurrent.futures import Future

from broker.daemon.executor import kv
from broker.daemon.hooks import CheckpointHook, HookResult, HookRunner
from broker.daemon.store.store import Store
from broker.lifecycle import Decision
from markets.clock import Clock
from markets.cloud_fleet import Notice
from markets.redaction import redact

__all__ = ["HookCalls"]

log = logging.getLogger("spotfolio.daemon")


class HookCalls:
    """Checkpoint hooks started at notice time, and their results stored later."""

    def __init__(
        self,
        hooks: Mapping[str, CheckpointHook],
        store: Store,
        clock: Clock,
        *,
        owner: str,
        dry_run: bool = False,
        runner: HookRunner | None = None,
    ) -> None:
        self._hooks = hooks
        self._store = store
        self._clock = clock
        self._owner = owner
        self._dry_run = dry_run
        # None: one is made at the first call, resolving ``env`` references
        # only; the daemon's wiring passes one with the cloud's resolver.
        self._runner = runner
        # (notice id, workload, result) put by hook threads, taken by the daemon's.
        self._done: queue.SimpleQueue[tuple[str, str, HookResult]] = queue.SimpleQueue()
        self.in_flight = 0
        self.started = 0

    def call(self, notice: Notice, decision: Decision) -> bool:
        """Start the decision's workload's hook, if configured, for a
        revocation (the lifecycle gave it a ``CheckpointVerdict``); returns at
        once. Its budget is what the lifecycle left of the notice window."""
        cp, workload = decision.checkpoint, decision.workload
        if cp is None or workload is None:
            return False
        hook = self._hooks.get(workload)
        if hook is None:
            return False
        if self._dry_run:
            log.info(kv("dry_run_hook", notice=notice.notice_id, workload=workload))
            return False
        if self._runner is None:
            self._runner = HookRunner()
        budget_s = float(cp.hook_budget_s)
        fut = self._runner.submit(
            hook,
            notice_id=notice.notice_id,
            workload=workload,
            instance_id=notice.instance_id,
            deadline=notice.deadline,
            budget_s=budget_s,
        )
        self.in_flight += 1
        self.started += 1
        nid, at = notice.notice_id, self._clock.now()

        def done(f: Future[HookResult]) -> None:
            try:
                res = f.result()
            except Exception as e:  # a hook thread's boundary: run_checkpoint_hook should not raise
                res = HookResult(
                    "error", False, False, 0.0, budget_s, at, redact(f"hook crashed: {e}")
                )
            self._done.put((nid, workload, res))

        fut.add_done_callback(done)
        return True

    def drain(self) -> int:
        """Store the results of hooks that finished (call under the daemon's lock)."""
        n = 0
        while True:
            try:
                nid, workload, res = self._done.get_nowait()
            except queue.Empty:
                return n
            self.in_flight -= 1
            if not self._dry_run:
                with self._store.transaction() as tx:
                    tx.record_hook_result(
                        self._owner, nid, workload, res.as_record(), self._clock.now()
                    )
            log.log(
                logging.INFO if res.ok else logging.WARNING,
                kv(
                    "checkpoint_hook",
                    notice=nid,
                    workload=workload,
                    ok=res.ok,
                    timed_out=res.timed_out,
                    elapsed_s=f"{res.elapsed_s:.2f}",
                    detail=res.detail,
                ),
            )
            n += 1

    def shutdown(self) -> None:
        """Wait for running hooks (each bounded by its budget)."""
        if self._runner is not None:
            self._runner.shutdown(wait=True)
            self._runner = None
