"""The collector's counters in `stats().extra`, on the pure-Python engine: what each one counts."""
import time

from truestack.sampler import Sampler


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_drain_that_blocks_counts_once_however_often_it_blocks():
    def blocking_sink(batch):
        for _ in range(3):
            time.sleep(0.001)

    with Sampler(mode="wall", rate=200, engine="safepoint", on_samples=blocking_sink, drain_interval=0.05) as sampler:
        _spin(0.5)
    extra = sampler.stats().extra
    drains = extra["collector_drains"]
    assert drains >= 3, extra
    # Every drain handed to the sink blocked: each one is a cut drain, counted once ...
    assert drains <= extra["collector_gil_handbacks"] <= extra["collector_wakeups"], extra
    # ... while the blocks themselves are three (or more) per drain.
    assert extra["collector_drain_blocks"] >= 3 * drains, extra


def test_drains_that_never_block_count_no_hand_back():
    with Sampler(mode="wall", rate=200, engine="safepoint", on_samples=lambda batch: None, drain_interval=0.05) as sampler:
        time.sleep(0.5)  # the program's thread never wants the GIL: nothing takes it from a drain
    extra = sampler.stats().extra
    assert extra["collector_drains"] >= 3, extra
    assert extra["collector_gil_handbacks"] == extra["collector_drain_blocks"] == 0, extra
