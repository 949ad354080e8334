"""The check shared by the `zoo` subcommands' tests (tools/cli/*_test.py import it as
`tests.cli_checks`). Not part of the installed package."""

from zoo.tools.cli import main


def one_sentence_error(argv, capsys):
    """Runs `zoo ARGV`, which must fail with exit code 2 and one line `zoo: error: ...` on standard
    error, no traceback; returns that line."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, (argv, err)
    assert err.startswith("zoo: error: "), err
    assert "Traceback" not in err and len(err.strip().split("\n")) == 1, err
    return err.strip()
