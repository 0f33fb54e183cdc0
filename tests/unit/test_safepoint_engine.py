"""The pure-Python fallback engine, driven through the public Sampler."""
import threading
import time

from truestack.sampler import Sampler


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _sleeper(seconds: float) -> None:
    time.sleep(seconds)


def test_safepoint_engine_sees_all_threads_and_labels_itself_biased():
    with Sampler(mode="wall", rate=200, engine="safepoint") as sampler:
        worker = threading.Thread(target=_sleeper, args=(0.4,), name="sleepy")
        worker.start()
        _spin(0.4)
        worker.join()
    samples = list(sampler.drain())
    names = {s.thread_name for s in samples}
    assert {"MainThread", "sleepy"} <= names
    stats = sampler.stats()
    assert stats.engine == "safepoint" and stats.biased
    assert stats.samples == len(samples)
    sleepy = [s for s in samples if s.thread_name == "sleepy"]
    assert all(s.frames[-1].name == "_sleeper" for s in sleepy[1:])
    assert any(s.state == "idle" for s in sleepy)


def test_safepoint_cpu_mode_weights_by_thread_cpu_time():
    with Sampler(mode="cpu", rate=200, engine="safepoint") as sampler:
        worker = threading.Thread(target=_sleeper, args=(0.4,), name="sleepy")
        worker.start()
        _spin(0.4)
        worker.join()
    samples = list(sampler.drain())
    spin_ns = sum(s.weight_ns for s in samples if s.frames and s.frames[-1].name == "_spin")
    sleep_ns = sum(s.weight_ns for s in samples if s.thread_name == "sleepy")
    assert spin_ns > 0.25e9
    assert sleep_ns < 0.05 * spin_ns


def test_sampler_restarts():
    sampler = Sampler(mode="wall", rate=100, engine="safepoint")
    for _ in range(2):
        sampler.start()
        _spin(0.1)
        sampler.stop()
    assert sampler.stats().samples > 0
