import pytest

from truestack.rates import parse_rate


@pytest.mark.parametrize("text,hz", [("250", 250), ("1k", 1000), ("10khz", 10000), ("10 kHz", 10000),
                                     ("99hz", 99), (500, 500), ("2.5k", 2500)])
def test_parse_rate_accepts_common_spellings(text, hz):
    assert parse_rate(text) == hz


@pytest.mark.parametrize("text", ["", "fast", "0", "-5", "1M", "10kk", "200k"])
def test_parse_rate_rejects_nonsense(text):
    with pytest.raises(ValueError):
        parse_rate(text)


@pytest.mark.parametrize("text", ["0.2", 0.5, "0.99hz"])
def test_parse_rate_rejects_sub_hertz_rates(text):
    with pytest.raises(ValueError, match="between 1 Hz"):
        parse_rate(text)
