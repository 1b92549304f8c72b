"""The ``pmwcm`` command line: one :data:`app`, one small module per command.

Each command lives in its own module (``pmwcm.cli.schema`` for
``pmwcm schema``) as a plain function and is registered here, so this file
stays a table of contents. Command modules import heavy dependencies inside
the function body, so ``pmwcm --help`` stays fast.

Conventions every command follows: results go to stdout, warnings and
progress to stderr; output files are written atomically, so a failure leaves
nothing half-written; ``-h`` is ``--help``.

Exit status (the same for every command, :data:`EXIT_CODES`): 0 done; 1 bad
input or a refusal, one line ``error: <what is wrong>`` on stderr, nothing
written; 2 a usage mistake (unknown option, missing value: click's message);
3 ``pmwcm run`` wrote its answers but some are synthetic (the engine halted
and answered them from its final hypothesis without an accuracy check).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import typer

from pmwcm.cli.ask import ask_command
from pmwcm.cli.audit import audit_command
from pmwcm.cli.demo import demo_command
from pmwcm.cli.run import RUN_HELP, run_command
from pmwcm.cli.schema import schema_command
from pmwcm.cli.serve import serve_command
from pmwcm.cli.synth import synth_command
from pmwcm.kernels.threads import limit_blas_threads

#: What each exit status of ``pmwcm`` means (README, "Exit status").
EXIT_CODES = {
    0: "done",
    1: "bad input or a refusal: one 'error:' line on stderr, nothing written",
    2: "usage mistake (unknown option, missing value)",
    3: "pmwcm run: answers written, but some are synthetic (the engine halted)",
}

app = typer.Typer(
    name="pmwcm",
    help="Online Private Multiplicative Weights for convex-minimization queries.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: no rich boxes with <bool>/<str> tags, and readable in a pipe.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        try:
            typer.echo(f"pmwcm {version('pmwcm')}")
        except PackageNotFoundError:
            typer.echo("pmwcm (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_version, is_eager=True
    ),
) -> None:
    """Online Private Multiplicative Weights for convex-minimization queries."""
    # One BLAS thread: the engine's kernels are small or memory-bound, and extra
    # BLAS threads only contend for the cores (pmwcm.kernels.threads).
    limit_blas_threads(1)


app.command("demo")(demo_command)
app.command("run", help=RUN_HELP)(run_command)
app.command("synth")(synth_command)
app.command("schema")(schema_command)
app.command("serve")(serve_command)
app.command("ask")(ask_command)
app.command("audit")(audit_command)


def main() -> None:
    """Entry point of the ``pmwcm`` console script."""
    app()
