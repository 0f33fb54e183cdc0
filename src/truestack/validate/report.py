"""Text and JSON renderings of a ValidationResult."""

from __future__ import annotations

import json
from typing import Any

from .result import ERROR_KINDS, ValidationResult

_LAYER_TITLES = {
    "sync": "sync   (walker vs frame chain at function entries)",
    "async": "async  (walker vs shadow stack at random signals)",
    "shadow": "shadow (event-kept shadow stack vs frame chain: the oracle's own ground)",
}


def _pct(x: float) -> str:
    return f"{100.0 * x:.3f} %"


def render_json(result: ValidationResult) -> str:
    return json.dumps(result.as_dict(), indent=2, sort_keys=True)


def render_text(result: ValidationResult) -> str:
    c = result.counters
    lines = [
        f"truestack validate: {result.target}",
        f"  target exit status {result.target_status}; Python {result.python}; {result.duration_s:.1f} s; "
        f"seed {result.settings.get('seed')}",
    ]
    if result.settings.get("walker_fault"):
        lines.append(
            f"  TEST FAULT INJECTED into the walker's results: {result.settings['walker_fault']} "
            f"({c.get('faults_injected', 0)} stacks damaged)"
        )
    lines.append("")
    lines.append(f"  {'layer':<8}{'checked':>10}{'errors':>9}{'error rate':>13}{'boundary':>10}{'partial':>9}")
    for name in ("sync", "async", "shadow"):
        layer = result.layers[name]
        lines.append(
            f"  {name:<8}{layer.checked:>10}{layer.errors:>9}{_pct(layer.error_rate):>13}"
            f"{layer.count('boundary'):>10}{layer.count('partial'):>9}"
        )
    lines.append("")
    for name in ("sync", "async", "shadow"):
        lines.append(f"  {_LAYER_TITLES[name]}")
    rate = c.get("signals_sent", 0) / result.duration_s if result.duration_s else 0.0
    lines.append(
        f"  signals: {c.get('signals_sent', 0)} sent ({rate:.0f}/s achieved, "
        f"{result.settings.get('async_rate_hz', 0):.0f}/s requested), {c.get('signals_handled', 0)} checked, "
        f"{c.get('signals_busy', 0)} skipped (thread inside a synchronous check), "
        f"{c.get('signals_unregistered', 0)} to unregistered threads; "
        f"threads seen {c.get('threads', 0)}; shadow resyncs {c.get('shadow_resyncs', 0)}, "
        f"missed returns {c.get('shadow_pop_mismatches', 0)}, delegating frames linked without events "
        f"{c.get('silent_links', 0)}"
    )
    if not result.settings.get("sync_every"):
        lines.append("  note: synchronous checks are off, so the shadow stacks were not checked either")
    if c.get("partial_reasons"):
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(c["partial_reasons"].items()))
        lines.append(f"  partial walks by reason: {reasons}")
    mismatches = [
        (n, k, v) for n in ("sync", "async", "shadow") for k, v in result.layers[n].kinds.items() if k != "ok" and v
    ]
    if mismatches:
        lines.append("")
        lines.append("  mismatches by kind:")
        examples = {(e["layer"], e["kind"]): e for e in result.examples}
        for layer_name, kind, n in mismatches:
            tag = "error" if kind in ERROR_KINDS else "noted"
            lines.append(f"    {layer_name} {kind}: {n} ({tag})")
            ex = examples.get((layer_name, kind))
            if ex:
                lines.extend(_example_lines(ex))
    lines.append("")
    lines.append(
        f"  error rate {_pct(result.error_rate)} over {result.checked} walker checks "
        f"(max {_pct(result.max_error)}): {result.verdict}"
    )
    if not result.conclusive:
        lines.append(
            f"  too few checks for a verdict: at least {result.min_checks} needed "
            "(run the program longer, or did it fail early?)"
        )
    return "\n".join(lines)


def _example_lines(ex: dict[str, Any]) -> list[str]:
    expected = "frame chain" if ex["layer"] in ("sync", "shadow") else "shadow stack"
    got = "shadow stack" if ex["layer"] == "shadow" else "walker"
    out = [
        f"      example (thread {ex['thread_id']}{', injected fault' if ex.get('fault_injected') else ''}),"
        f" root first, leaf last:"
    ]
    out.append(f"        {got} (depth {ex['got_depth']}):")
    out.extend(f"          {f}" for f in ex["got"])
    note = " (lines are function definitions: the shadow records no positions)" if ex["layer"] == "async" else ""
    out.append(f"        {expected} (depth {ex['expected_depth']}){note}:")
    out.extend(f"          {f}" for f in ex["expected"])
    return out
