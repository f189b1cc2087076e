"""The console's background samplers in the main process: consumer-group lag (lag_history.py), every
topic's messages in per second (rates.py) and the broker's own counters (metrics_history.py). Started with the console, stopped with it. The lag sampler's
admin client uses the broker's inter-broker listener and credentials, as the registry's client does."""

from __future__ import annotations

from mmlog.client.admin import Admin
from mmlog.console.lag_history import LagHistory, LagSampler
from mmlog.console.metrics_history import MetricsHistory
from mmlog.console.rates import Rates, RateSampler
from mmlog.registry.service import client_options

CLIENT_ID = "mmlog-console-sampler"


def admin_maker(config):
    """() -> an Admin of the broker's own on its inter-broker listener."""
    listener = config.inter_broker_listener
    host = "127.0.0.1" if listener.host in ("", "0.0.0.0") else listener.host
    bootstrap = f"[{host}]:{listener.port}" if ":" in host else f"{host}:{listener.port}"
    options = client_options(config)
    return lambda: Admin(bootstrap, client_id=CLIENT_ID, timeout=10.0, **options)


class Samplers:
    """The lag, topic rate and metrics samplers of one console (`totals`: the metrics block's summed words,
    or None)."""

    def __init__(self, config, totals=None) -> None:
        self.lag = LagSampler(admin_maker(config), LagHistory())
        self.rates = Rates()
        self.rate_sampler = RateSampler(admin_maker(config), self.rates)
        self.metrics = MetricsHistory(totals) if totals is not None else None

    def start(self) -> None:
        self.lag.start()
        self.rate_sampler.start()
        if self.metrics is not None:
            self.metrics.start()

    def stop(self) -> None:
        self.lag.stop()
        self.rate_sampler.stop()
        if self.metrics is not None:
            self.metrics.stop()
