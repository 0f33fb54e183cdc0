"""How a profile was taken, said the same way by every output.

The engine actually used, the mode, the requested and achieved rate, and
what went wrong (dropped and partial samples, an interrupted run, a biased
engine) are read from `ProfileMeta` here only: the summary and the table
header (`header_lines`), the flame graph header and its warnings
(`sampling_facts`, `warnings`), Firefox's "extra" panel, pprof comments and
speedscope's title (`facts_line`) all say the same thing.
"""

from __future__ import annotations

from .profile import Profile


def format_rate(value: float | None) -> str:
    if not value:
        return "?"
    return f"{value / 1000:.3g} kHz" if value >= 1000 else f"{value:.4g} Hz"


def samples_taken(profile: Profile) -> int:
    stats = profile.meta.sampler_stats
    return stats.samples if stats is not None else profile.sample_count


def sampling_facts(profile: Profile) -> list[tuple[str, str]]:
    """[(label, value)] in reading order: engine, mode, rate, samples, losses."""
    meta = profile.meta
    stats = meta.sampler_stats
    partial = profile.meta.partial_counts
    partial_text = str(sum(partial.values()))
    if partial:
        partial_text += " (" + ", ".join(f"{k}: {v}" for k, v in sorted(partial.items())) + ")"
    achieved = stats.achieved_rate_hz if stats else 0.0
    facts = [
        ("engine", meta.engine_used + (" (biased)" if meta.biased else "")),
        ("mode", meta.mode_used),
        (
            "rate",
            f"{format_rate(meta.requested_rate_hz)} requested, "
            + (f"{format_rate(achieved)} achieved" if achieved else "achieved unknown"),
        ),
        ("samples", f"{samples_taken(profile):,}"),
        ("dropped", f"{stats.dropped if stats else 0:,}"),
        ("partial", partial_text),
    ]
    if stats and stats.timer:
        facts.append(("timer", stats.timer))
    if meta.interrupted:
        facts.append(("interrupted", meta.interrupted))
    return facts


def facts_line(profile: Profile) -> str:
    """The facts on one line: `engine native-cpu, mode cpu, rate ..., dropped 0, ...`."""
    return ", ".join(f"{label} {value}" for label, value in sampling_facts(profile))


def is_biased(profile: Profile) -> bool:
    return profile.meta.biased or profile.meta.engine_used == "safepoint"


def warnings(profile: Profile) -> list[str]:
    """What a reader must know before trusting the numbers, one sentence each."""
    meta = profile.meta
    out = []
    if is_biased(profile):
        out.append(
            "Biased profile (safepoint engine): threads were only seen at eval-breaker checks "
            "and GIL switches, so time spent in C code and between checks is misattributed. "
            "Use the native engine for accurate numbers."
        )
    if meta.interrupted:
        out.append(f"The run ended early: {meta.interrupted}.")
    dropped = meta.sampler_stats.dropped if meta.sampler_stats else 0
    if dropped:
        out.append(f"{dropped:,} samples were dropped by the sampler.")
    return out


def header_lines(profile: Profile, shown_samples: int | None = None) -> list[str]:
    """The summary's and the table's header: how the profile was taken, then what went wrong."""
    meta = profile.meta
    stats = meta.sampler_stats
    taken = samples_taken(profile)
    duration = (stats.duration_s if stats and stats.duration_s else 0) or profile.duration_ns / 1e9
    engine = (stats.engine if stats and stats.engine else "") or meta.engine or "?"
    mode = (stats.mode if stats and stats.mode else "") or meta.mode or "?"
    lines = [f"truestack: {taken} samples in {duration:.2f} s, {mode} mode, engine {engine}"]
    if (stats and stats.biased) or engine == "safepoint":
        lines.append(
            "  WARNING: biased profile: the safepoint engine sees threads only at eval-breaker checks and GIL switches"
        )
    requested = stats.requested_rate_hz if stats and stats.requested_rate_hz else meta.rate_hz
    achieved = stats.achieved_rate_hz if stats else None
    lines.append(
        f"  rate: requested {format_rate(requested)}, achieved {format_rate(achieved)}"
        + (f" ({stats.timer})" if stats and stats.timer else "")
    )
    partial = profile.meta.partial_counts
    partial_text = ", ".join(f"{reason} {count}" for reason, count in sorted(partial.items()))
    lines.append(
        f"  samples: {taken} taken, {stats.dropped if stats else 0} dropped, "
        f"{sum(partial.values())} partial" + (f" ({partial_text})" if partial_text else "")
    )
    lines.extend(count_explanations(profile, requested, stats.dropped if stats else 0))
    cost = cost_line(stats.extra if stats else {}, taken)
    if cost:
        lines.append(cost)
    in_profile = profile.sample_count if shown_samples is None else shown_samples
    if in_profile != taken:
        lines.append(f"  samples in this output: {in_profile}")
    if meta.function_level:
        lines.append("  lines merged per function (--function-level)")
    if meta.idle_excluded:
        lines.append(f"  {meta.idle_excluded} idle samples left out (--include-idle keeps them)")
    lines.extend(process_lines(profile))
    for note in stats.notes if stats else []:
        lines.append(f"  note: {note}")
    if meta.interrupted:
        lines.append(f"  INTERRUPTED: {meta.interrupted} — the profile covers the run up to that point")
    return lines


def process_lines(profile: Profile) -> list[str]:
    """record --subprocesses: samples and sampled time of each process, in the order they started."""
    if not profile.meta.processes:
        return []
    unit = "CPU" if profile.meta.mode != "wall" else "wall"
    lines = [f"  processes: {len(profile.meta.processes)}"]
    for info in profile.meta.processes:
        threads = [profile.threads[t] for t in info.threads if t in profile.threads]
        count = sum(len(t) for t in threads)
        seconds = sum(sum(t.weight_ns) for t in threads) / 1e9
        how = {"main": "the program", "fork": f"forked by {info.parent}", "exec": f"started by {info.parent}"}
        end = "" if info.complete else ", stream cut short (killed or crashed)"
        if info.start_cpu_ns >= 5_000_000:  # a new interpreter's start-up and the sampler's import
            end += f", {info.start_cpu_ns / 1e9:.2f} s CPU before sampling started"
        lines.append(f"    {info.label}: {count} samples, {seconds:.2f} s {unit} ({how.get(info.how, info.how)}{end})")
    return lines


def cost_line(extra: dict[str, object], samples: int) -> str | None:
    """What one sample cost the program, by part, from the native engine's counters (None otherwise)."""
    delivery, handler, collector = (extra.get(k) for k in ("signal_delivery_ns", "handler_ns", "collector_ns"))
    signals = extra.get("signals")
    if samples <= 0 or not (isinstance(delivery, int) and isinstance(handler, int) and isinstance(collector, int)):
        return None
    # Delivery was measured once, per signal; the handler and collector counters are totals over the run.
    per = {
        "kernel delivery": float(delivery),
        "handler": handler / max(signals if isinstance(signals, int) else samples, 1),
        "collector": collector / samples,
    }
    control = extra.get("control_ns")
    if isinstance(control, int):  # profiles of before 2026-11-28 lack it
        per["control thread"] = control / samples
    split = ", ".join(f"{name} {ns / 1000:.0f} µs" for name, ns in per.items())
    return f"  cost per sample: ~{sum(per.values()) / 1000:.0f} µs ({split})"


def count_explanations(profile: Profile, rate: float | None, dropped: int) -> list[str]:
    """What a user comparing sample counts needs: per thread, and why cpu mode takes fewer."""
    lines = []
    threads = sorted(profile.threads.values(), key=lambda t: -len(t))
    if len(threads) > 1:
        shown = ", ".join(f"{t.name} {len(t):,}" for t in threads[:6])
        lines.append(f"  per thread: {shown}" + (f" (+{len(threads) - 6} more)" if len(threads) > 6 else ""))
    mode = profile.meta.mode_used
    if mode == "cpu" and rate:
        cpu_s = profile.total_weight_ns / 1e9  # cpu mode: each sample weighs its thread's CPU time
        lines.append(
            f"  cpu mode samples CPU time, not wall time: {cpu_s:.2f} s of CPU at {format_rate(rate)} "
            f"≈ {round(cpu_s * rate):,} samples (threads that wait are not sampled; wall mode samples them)"
        )
    elif mode == "wall" and rate:
        lines.append(f"  wall mode samples every thread every {1000 / rate:g} ms, running or waiting")
    if dropped:
        lines.append(f"  {dropped} samples dropped: no room in the sample ring (the collector fell behind)")
    return lines
