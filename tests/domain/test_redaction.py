import pytest

from domain import (
    MASK,
    is_secret_name,
    redact,
    redact_setting,
    redact_uri,
    remember,
    secrets_of_settings,
    secrets_of_uri,
)


@pytest.mark.parametrize(
    "uri, shown",
    [
        ("redis://:hunter2@127.0.0.1:6379/0", "redis://***@127.0.0.1:6379/0"),
        ("redis://admin:hunter2@127.0.0.1:6379/0", "redis://***@127.0.0.1:6379/0"),
        ("REDIS://admin:hunter2@h:1/0", "REDIS://***@h:1/0"),
        ("redis://h:1/0?password=hunter2&db=1", "redis://h:1/0?password=***&db=1"),
        ("kafka://b:9092/t?group=g&sasl.password=hunter2", "kafka://b:9092/t?group=g&sasl.password=***"),
        ("kafka://b:9092/t?ssl.key.password=hunter2", "kafka://b:9092/t?ssl.key.password=***"),
        ("kafka://b:9092/t?group=g", "kafka://b:9092/t?group=g"),
        ("file:/tmp/out.jsonl", "file:/tmp/out.jsonl"),
    ],
)
def test_a_uri_is_shown_without_its_secrets(uri, shown):
    assert redact_uri(uri) == shown


@pytest.mark.parametrize(
    "text",
    [
        "got 'redis://u:hunter2@h:1/0' and 'x'",
        'Invalid value "hunter2" for sasl.password=hunter2',
        "{'sasl.password': 'hunter2', 'bootstrap.servers': 'b:1'}",
        'sasl.jaas.config="org.Login required username=\\"u\\" password=hunter2;"',
    ],
)
def test_a_secret_inside_any_text_is_masked(text):
    remember(["hunter2"])
    shown = redact(text)
    assert "hunter2" not in shown and MASK in shown


def test_a_remembered_value_is_masked_wherever_it_appears_and_short_ones_are_not_remembered():
    remember(["s3cr3t-value", "ab"])
    assert redact("librdkafka: bad value s3cr3t-value here") == "librdkafka: bad value *** here"
    assert redact("ab cd") == "ab cd"


def test_secret_names_and_settings():
    assert all(
        map(
            is_secret_name,
            [
                "sasl.password",
                "ssl.key.password",
                "password",
                "sasl.jaas.config",
                "sasl.oauthbearer.client.secret",
                "token",
                "api_key",
            ],
        )
    )
    assert not any(map(is_secret_name, ["bootstrap.servers", "group", "key_fields", "ssl.key.location"]))
    assert redact_setting("kafka.config.sasl.password", "x") == MASK
    assert redact_setting("state", "redis://:pw1@h:1/0") == "redis://***@h:1/0"
    assert redact_setting("batch_size", 5) == 5


def test_the_secrets_of_settings_are_found_at_any_depth_and_in_uris():
    found = secrets_of_settings(
        {
            "kafka": {"config": {"sasl.password": "p1", "client.id": "c"}},
            "state": "redis://u1:p2@h:1/0",
            "source": "kafka://b:1/t?sasl.password=p3",
        }
    )
    assert sorted(found) == ["p1", "p2", "p3", "u1"]
    assert secrets_of_uri("redis://h:notaport/0?password=p4") == ["p4"]


@pytest.mark.parametrize(
    "uri",
    [
        "redis://admin:Sup3r/Secret@h:6379/0",
        "redis://admin:Sup3r#Secret@h:6379/0",
        "redis://admin:Sup3r?Secret@h:6379/0",
        "redis://admin:Sup3r@Secret@h:99999/0",
        "redis:/admin:Sup3rSecret@h:6379/0",
        "kafka:/admin:Sup3rSecret@h:9092/t",
        "kafka://admin:Sup3r/Secret@h:9092/t",
        "rediss://admin:Sup3r%2FSecret@h:6379/0",
    ],
)
def test_a_password_holding_uri_delimiters_or_behind_a_typo_is_masked_whole(uri):
    shown = redact_uri(f"invalid setting state: {uri!r} has an invalid port")
    assert "Sup3r" not in shown and "Secret" not in shown and "admin" not in shown and MASK in shown
    assert "h:" in shown  # the host is still shown
    assert any("Sup3r" in secret for secret in secrets_of_uri(uri))


def test_the_secrets_of_a_one_slash_uri_setting_are_remembered():
    assert "pw1x" in secrets_of_settings({"state": "redis:/admin:pw1x@h:6379/0"})
