"""Generator-creating code at a high rate, for `truestack validate` (argv[1]: seconds).

Every call to a generator function runs RETURN_GENERATOR, which pops the
function's frame before the eval loop publishes its caller as the top frame
(3.11/3.12); on 3.11 every return pops before it relinks too. A walker that
mishandles that window returns a complete stack with frames missing.
"""
import sys
import time


def one(n):
    yield n


def two(n):
    yield n
    yield n + 1


def counter(n):
    for i in range(n):
        yield i


def make(n):
    return one(n), two(n), counter(n), (x for x in ()), (x * 2 for x in range(n))


def consume(n):
    s = 0
    for gen in make(n):
        for v in gen:
            s += v
    return s


def creator(n):
    made = []
    for i in range(n):
        made.append(one(i))
        made.append(counter(i))
        made.append(y for y in made)
    return len(made)


def burst(n):
    # Created and dropped at once: little else between two frame pops.
    for i in range(n):
        one(i)
        two(i)
        counter(i)
        one(i)


def driver():
    consume(3)
    creator(20)
    burst(40)


def main(seconds: float) -> None:
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        driver()


main(float(sys.argv[1]))
