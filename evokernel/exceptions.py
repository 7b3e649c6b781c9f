"""Every error evokernel raises on purpose derives from :class:`EvoKernelError`.

Callers catch the narrow subclass they can handle; the CLI catches the root and prints the
message, which is written to say what went wrong and what to do about it.
"""

from __future__ import annotations


class EvoKernelError(Exception):
    """Root of all evokernel errors."""


class ConfigError(EvoKernelError):
    """An experiment config is invalid: unknown key, wrong type, bad value."""


class TaskError(EvoKernelError):
    """A task file (or folder) cannot be loaded; the message names the file and what is missing."""


class LibraryError(EvoKernelError):
    """The solution library cannot be opened, migrated or written."""


class RunNotFoundError(LibraryError):
    """A run id given to ``--resume`` or a report does not exist in the library."""


class PluginError(EvoKernelError):
    """A strategy, mutator or policy name does not resolve to a class."""


class MutationError(EvoKernelError):
    """A mutator could not produce a candidate (no usable code, no knobs to tune, ...)."""


class LLMError(MutationError):
    """An LLM call failed after its bounded retries."""


class EvaluationError(EvoKernelError):
    """The evaluation machinery itself failed (not the candidate: that is an Evaluation status)."""


class RequestError(EvaluationError):
    """An evaluation request's JSON does not decode (evaluation/request.py): an unknown or missing
    key, or a value of the wrong type. ``key`` names it."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


class BudgetExhausted(EvoKernelError):
    """Raised internally when no budget is left to start more work."""


class AnalysisError(LibraryError):
    """A report, export or dashboard query asked for something the library does not hold."""


class ExportError(EvoKernelError):
    """Kernels or a dataset could not be written out (or imported back as seeds)."""


class Terminated(KeyboardInterrupt):
    """A run or sweep was stopped by SIGTERM (a batch scheduler's preemption or time limit, or
    ``kill``): it stops at once like a second Ctrl-C, with the open work left in the library for
    ``--resume``. A :class:`KeyboardInterrupt`, not an :class:`EvoKernelError`, so every cleanup
    path that handles Ctrl-C handles it too; the CLI exits with 143 (128 + SIGTERM)."""
