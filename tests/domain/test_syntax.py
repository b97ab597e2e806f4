"""The settings' small languages (domain._syntax): durations and ``kind(option=value,…)`` steps."""

import pytest

from domain import parse_duration, parse_step, real_number, seconds, whole_number, word


@pytest.mark.parametrize(
    "value, expected",
    [
        (30, 30),
        ("30", 30),
        ("30s", 30),
        (" 10m ", 600),
        ("2h", 7200),
        ("1d", 86400),
        ("0.5m", 30),
        ("0", 0),
        (45.0, 45),
    ],
)
def test_whole_durations_are_int_seconds(value, expected):
    got = parse_duration(value)
    assert got == expected and type(got) is int


@pytest.mark.parametrize(
    "value, expected",
    [
        ("0.2", 0.2),
        (".5", 0.5),
        ("1.5s", 1.5),
        ("1.1m", 66.0),
        ("2h", 7200.0),
        (3, 3.0),
    ],
)
def test_fractional_durations_are_float_seconds(value, expected):
    got = parse_duration(value, whole=False)
    assert got == expected and type(got) is float


@pytest.mark.parametrize(
    "value, whole, message",
    [
        ("nan", False, "window must be a finite duration, got 'nan'"),
        ("inf", False, "window must be a finite duration, got 'inf'"),
        ("-infinity", True, "window must be a finite duration, got '-infinity'"),
        (float("nan"), True, "window must be a finite duration, got nan"),
        ("-5", True, "window must not be negative, got '-5'"),
        ("-0.1s", False, "window must not be negative, got '-0.1s'"),
        (-5, True, "window must not be negative, got -5"),
        ("1.5", True, "window must be whole seconds, got '1.5'"),
        (
            "30us",
            True,
            (
                "window must be seconds with an optional unit ms, s, m, h or d (e.g. 30, 250ms, 30s, 10m, "
                "2h, 1d), got '30us'"
            ),
        ),
        ("30ms", True, "window must be whole seconds, got '30ms'"),
        ("ten", False, "window must be seconds with an optional unit"),
        ("1e3", False, "window must be seconds with an optional unit"),
        ("", True, "window must be seconds with an optional unit"),
        (True, True, "window must be seconds with an optional unit"),
        (None, True, "window must be seconds with an optional unit"),
        ("99999999999999999999d", True, "window must be at most 3650d, got '99999999999999999999d'"),
        (3651 * 86400, True, "window must be at most 3650d"),
        ("1e400", False, "window must be seconds with an optional unit"),
    ],
)
def test_a_bad_duration_is_refused_naming_the_option_and_the_problem(value, whole, message):
    with pytest.raises(ValueError) as error:
        parse_duration(value, "window", whole=whole)
    assert message in str(error.value) and "\n" not in str(error.value)


KINDS = {
    "none": {},
    "retry": {"attempts": whole_number, "backoff": word, "delay": seconds, "factor": real_number},
}


def test_a_step_gives_its_kind_and_each_option_read_by_its_reader():
    assert parse_step(" retry( attempts=3, backoff=fixed, delay=2m, factor=1.5 ) ", KINDS) == (
        "retry",
        {"attempts": 3, "backoff": "fixed", "delay": 120.0, "factor": 1.5},
    )
    assert parse_step("none", KINDS) == parse_step("none()", KINDS) == ("none", {})


def test_an_option_name_may_use_a_dash():
    assert parse_step("retry(max-delay=1)", {"retry": {"max_delay": seconds}}) == ("retry", {"max_delay": 1.0})


@pytest.mark.parametrize(
    "text, message",
    [
        ("sometimes", "the step must be one of none(...), retry(...); got 'sometimes'"),
        ("retry(attempts=3", "the step must be one of none(...), retry(...); got 'retry(attempts=3'"),
        ("retry(tries=3)", "retry takes attempts, backoff, delay, factor; got 'tries'"),
        ("none(delay=1)", "none takes no options; got 'delay'"),
        ("retry(attempts=x)", "attempts must be a whole number, got 'x'"),
        ("retry(attempts=2.5)", "attempts must be a whole number, got '2.5'"),
        ("retry(attempts=-1)", "attempts must not be negative, got '-1'"),
        ("retry(factor=two)", "factor must be a number, got 'two'"),
        ("retry(factor=nan)", "factor must be a finite number, got 'nan'"),
        ("retry(factor=inf)", "factor must be a finite number, got 'inf'"),
        ("retry(factor=-2)", "factor must not be negative, got '-2'"),
        ("retry(delay=nan)", "delay must be a finite duration, got 'nan'"),
        ("retry(delay=-1s)", "delay must not be negative, got '-1s'"),
        ("retry(delay=soon)", "delay must be seconds with an optional unit"),
    ],
)
def test_a_bad_step_is_refused_in_one_line_naming_the_option(text, message):
    with pytest.raises(ValueError) as error:
        parse_step(text, KINDS)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_caller_says_what_the_step_is():
    with pytest.raises(ValueError, match=r"^a step before the last must be one of retry\(\.\.\.\); got 'skip'$"):
        parse_step("skip", {"retry": {}}, what="a step before the last")
