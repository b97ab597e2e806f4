"""The generated reference pages (app._reference) name every option and every setting the program has,
and every environment variable they name is one the settings loader accepts."""

from __future__ import annotations

from app import Settings, build_parser, cli_reference, commands, misspelt, options, setting_leaves, settings_reference
from domain import DEFAULT_BATCH_SIZE


def test_the_command_line_reference_shows_every_command_and_every_option():
    reference = cli_reference()
    names = [name for name, _ in commands(build_parser())]
    assert len(names) >= 7 and all(f"## `{name}`" in reference for name in names)
    for command, option in options(build_parser()):
        section = reference.split(f"## `{command}`", 1)[1].split("\n## ", 1)[0]
        assert option.option_strings[-1] in section, f"{command} {option.option_strings[-1]}"


def test_the_settings_reference_has_a_row_for_every_setting_whose_variable_the_loader_takes():
    reference = settings_reference()
    rows = {
        row.split("|")[1].strip(" `"): row.split("|")[2].strip(" `")
        for row in reference.splitlines()
        if row.startswith("| `")
    }
    names = {".".join(path) for path, *_ in setting_leaves(Settings)}
    assert set(rows) == names and len(names) > 40
    for variable in rows.values():
        path = variable.removeprefix("DEDUP_").split("__")
        assert misspelt(Settings, path, case_sensitive=False) is None, variable
    assert "| `rules.<TYPE>.window` | `DEDUP_RULES__WEB__WINDOW` | duration" in reference
    assert "| `spark.lease_timeout` | `DEDUP_SPARK__LEASE_TIMEOUT` | duration" in reference
    assert f"| `batch_size` | `DEDUP_BATCH_SIZE` | integer | `{DEFAULT_BATCH_SIZE}` |" in reference
