"""Code churn (fresh exec'd functions, code.replace, lambdas created and
dropped) vs the same arithmetic in a stable function.

Code objects die constantly here: a sampler that resolves them late may
attribute samples to the wrong code or lose them.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _truth import Truth, run

WORK = 3_000
PER_CALL = 10


def _template(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def churn(serial):
    acc = 0
    for k in range(PER_CALL):
        tag = serial * PER_CALL + k
        ns = {}
        exec(f"def churned_{tag}(n):\n    total = {tag}\n    for i in range(n):\n        total += i * i\n"
             f"    return total\n", ns)
        acc += ns[f"churned_{tag}"](WORK)
        replaced = _template.__code__.replace(co_consts=_template.__code__.co_consts + (tag,))
        acc += type(_template)(replaced, {"range": range})(WORK)
        acc += (lambda n, t=tag: sum(i * i for i in range(n)) + t)(WORK)
    return acc


def steady(serial):
    acc = 0
    for _ in range(PER_CALL):
        acc += _template(WORK)
        acc += _template(WORK)
        acc += sum(i * i for i in range(WORK))
    return acc


def body(truth: Truth) -> None:
    for n in truth.rounds_iter():
        truth.call(churn, n)
        truth.call(steady, n)


if __name__ == "__main__":
    truth = Truth("code_churn", "exec'd / replaced / lambda code created and dropped vs a stable function")
    truth.declare("churn", "steady")
    run(truth, body)
