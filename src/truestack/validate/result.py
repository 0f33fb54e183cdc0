"""What a validation run measured, and the error rates derived from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Mismatch kinds that mean the walker returned a wrong stack. The others are
# counted but are not errors: "boundary" (the frame being entered or left at
# the signal's instant) and "partial" (stacks the walker itself flagged).
ERROR_KINDS = ("missing", "extra", "reordered", "wrong_code", "wrong_line")
WALKER_LAYERS = ("sync", "async")


@dataclass
class LayerResult:
    name: str
    checked: int
    kinds: dict[str, int]

    @property
    def errors(self) -> int:
        return sum(self.kinds.get(k, 0) for k in ERROR_KINDS)

    @property
    def error_rate(self) -> float:
        return self.errors / self.checked if self.checked else 0.0

    def count(self, kind: str) -> int:
        return self.kinds.get(kind, 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "errors": self.errors,
            "error_rate": self.error_rate,
            "mismatches": {k: v for k, v in self.kinds.items() if k != "ok" and v},
        }


@dataclass
class ValidationResult:
    target: str
    target_status: int
    python: str
    layers: dict[str, LayerResult]
    examples: list[dict[str, Any]]
    max_error: float  # a fraction: 0.005 for 0.5 %
    min_checks: int = 200  # fewer walker checks than this cannot support a verdict
    counters: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0

    @classmethod
    def from_native(cls, raw: dict[str, Any], examples: list[dict[str, Any]], **kw: Any) -> ValidationResult:
        layers = {
            name: LayerResult(name, int(raw[name]["checked"]), {k: int(v) for k, v in raw[name]["kinds"].items()})
            for name in ("sync", "async", "shadow")
        }
        counters = {k: v for k, v in raw.items() if k not in ("sync", "async", "shadow", "examples")}
        return cls(layers=layers, examples=examples, counters=counters, **kw)

    @property
    def checked(self) -> int:
        return sum(self.layers[n].checked for n in WALKER_LAYERS)

    @property
    def errors(self) -> int:
        return sum(self.layers[n].errors for n in WALKER_LAYERS)

    @property
    def error_rate(self) -> float:
        return self.errors / self.checked if self.checked else 0.0

    @property
    def conclusive(self) -> bool:
        return self.checked >= self.min_checks

    @property
    def verdict(self) -> str:
        if not self.within_limit:
            return "FAIL"
        return "PASS" if self.conclusive else "INCONCLUSIVE"

    @property
    def passed(self) -> bool:
        """Enough checks, and every walker layer within the allowed error rate."""
        return self.conclusive and self.within_limit

    @property
    def within_limit(self) -> bool:
        """Overall and every walker layer within the allowed error rate."""
        if self.error_rate > self.max_error:
            return False
        return all(self.layers[n].error_rate <= self.max_error for n in WALKER_LAYERS)

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "target_exit_status": self.target_status,
            "python": self.python,
            "duration_s": round(self.duration_s, 3),
            "settings": self.settings,
            "layers": {name: layer.as_dict() for name, layer in self.layers.items()},
            "checked": self.checked,
            "errors": self.errors,
            "error_rate": self.error_rate,
            "max_error": self.max_error,
            "min_checks": self.min_checks,
            "verdict": self.verdict,
            "passed": self.passed,
            "counters": self.counters,
            "examples": self.examples,
        }
