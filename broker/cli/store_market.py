"""``--market store``: a daemon's store read as interruption history.

Owns ``open_store_market``: the market ``base`` names (``default``, ``aws``,
a recorded history...; its own options pass through) with each pool's hazard
learned from the revocations and spot hours a daemon recorded in its store
(``pool_experience``; ``owner``: one daemon's, else every owner's added), by
``markets.hazard.learning``, and the failure domains its revocations show.
So ``spotfolio whatif --market store --market-option url=sqlite:///state.db``
prices spot at what the account itself lived through. Registered in
``markets.registry.MARKETS`` as a lazy entry (this module is a composition
root: it names the store and the learning together).

Must not: write to the store (it is opened without migrating: a store of an
older schema, or none, is exit 2 naming ``--market-option url``), or decide.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from broker.daemon.plan_job import REVOCATION_KINDS
from broker.daemon.store.store import Store
from markets.errors import InputError
from markets.hazard.clustering import failure_domains
from markets.hazard.learning import LearnedHistory, LearnedMarket
from markets.hazard.posterior import Exposure
from markets.protocols import HistorySource, PriceSource
from markets.registry import open_market

__all__ = ["open_store_market"]


def open_store_market(
    url: str | None = None, owner: str | None = None, base: str = "default", **options: object
) -> PriceSource:
    """The ``base`` market at the hazards learned from the store at ``url``."""
    if not url:
        raise InputError("--market-option url", None, "a daemon store URL, e.g. sqlite:///state.db")
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
    if "://" not in path and not Path(path).is_file():  # opening would create it
        raise InputError("--market-option url", None, "an existing daemon store", got=url)
    store = Store(url, create=False)
    try:
        with store.transaction() as tx:
            counts = tx.experience(owner)
            times, span_s = tx.revocation_times(owner, REVOCATION_KINDS)
    except SQLAlchemyError:
        raise InputError(
            "--market-option url",
            None,
            "a daemon store with pool experience (run the daemon on it first)",
            got=store.url.partition("://")[0] + "://...",
        ) from None
    finally:
        store.close()
    evidence = {k: Exposure(n, h) for k, (n, h) in counts.items() if h > 0}
    domains = failure_domains(times, span_s=span_s, source="account") if span_s > 0 else ()
    market = open_market(base, "--market-option base", **options)
    if isinstance(market, HistorySource):
        return LearnedHistory(market, lambda: evidence, lambda: domains)
    return LearnedMarket(market, lambda: evidence, lambda: domains)
