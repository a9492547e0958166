"""What every ``kernelopt`` command shares: the typer app, the consoles, the options that have a setting,
and the one-line error for a KerneloptError. Each command module imports these and registers its
commands on :data:`app`; :mod:`kernelopt.cli.main` imports every command module, so none imports it.
"""

from __future__ import annotations

import ast
import functools
import json
import sys
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

# torch's own notices about settings kernelopt chose on purpose (caches off for capture,
# one profiler cycle); they say nothing to the user.
warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")

from kernelopt.config import EFFORTS, Settings, load_settings, setting_fields  # noqa: E402 - after the filters
from kernelopt.errors import KerneloptError  # noqa: E402

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Make torch.compile'd models faster by optimizing the Triton kernels Inductor generates.",
)
# Wide, unwrapped output when piped (logs, CI), so lines stay greppable.
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])


def _shown_settings() -> Settings:
    """The effective settings for ``--help`` only; a malformed one shows the profile defaults here
    and stops the command itself with its one-line error."""
    try:
        return load_settings()
    except KerneloptError:
        return Settings()


_SHOWN = _shown_settings()
_ENV = {f.name: f.metadata["env"] for f in setting_fields()}


def setting_option(name: str, *flags: str, help: str) -> Any:
    """A typer option for setting ``name``: None unless given, its help naming the setting and
    its variable, the effective value shown as the default."""
    value = getattr(_SHOWN, name)
    shown = (
        f"{value:g}"
        if isinstance(value, float)
        else ",".join(map(str, value))
        if isinstance(value, tuple)
        else str(value)
    )
    return typer.Option(
        None,
        *flags,
        help=f"{help} Setting {name} (${_ENV[name]}).",
        show_default=f"{shown} from {_SHOWN.sources.get(name, 'default')}",
    )


TRAIN_OPTION = typer.Option(
    False,
    "--train",
    help="The training step: forward and backward kernels, judged on outputs and every parameter's gradient "
    "(loss: the problem's get_loss(outputs), else the sum of its outputs).",
)
STORE_OPTION = setting_option("store", "--store", help="SQLite store file.")
LLM_CONFIG_OPTION = typer.Option(None, "--llm-config", help="TOML file with the LLM settings (see docs/llm.md).")
EFFORT_OPTION = typer.Option(
    None,
    "--effort",
    help=f"Effort profile, one of {', '.join(EFFORTS)}: the defaults of the budgets, "
    "seeds, trials and time-outs (see kernelopt config).",
    show_default=f"{_SHOWN.effort} from {_SHOWN.sources.get('effort', 'default')}",
)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def user_errors(fn: F) -> F:
    """Print a KerneloptError as one line and exit 2, instead of a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KerneloptError as exc:
            err.print(f"kernelopt: error: {exc}", markup=False, highlight=False)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


SIZE_OPTION = typer.Option(
    None,
    "--size",
    help="NAME=VALUE: set a size constant of the file for this run (repeatable), e.g. --size batch_size=4096.",
)


def parse_sizes(items: list[str] | None) -> dict[str, Any] | None:
    """``--size NAME=VALUE`` options as overrides of the file's size constants (None: the file's own)."""
    if not items:
        return None
    sizes: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise KerneloptError(f"--size {item!r}: expected NAME=VALUE, e.g. --size batch_size=4096")
        try:
            sizes[name] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            raise KerneloptError(
                f"--size {item!r}: {raw.strip()!r} is not a number or another Python literal"
            ) from None
    return sizes
