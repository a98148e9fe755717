"""The exceptions of the package.

Every failure of the C library is raised as a subclass of :class:`Error`
chosen by its ``TS_E*`` code, carrying the C error's message (which names
what and where). The subclasses also derive from the matching built-in
exception, so ``except ValueError`` or ``except FileNotFoundError`` work
too.
"""

from __future__ import annotations

from typing import Optional


class Error(Exception):
    """A failure reported by tessera.

    Attributes:
        code: the C library's ``TS_E*`` code (negative), or 0 for an error
            raised by the Python layer itself.
        message: the C error's text.
        line, column: the position in text input (a TIR parse error), or 0.
    """

    def __init__(self, message: str, code: int = 0, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.line = line
        self.column = column


class InvalidError(Error, ValueError):
    """Bad argument or malformed input (``TS_EINVAL``): a bad workload spec,
    a model the importer refuses, an unknown option value."""


class ParseError(InvalidError):
    """Text that does not parse (``TS_EPARSE``); ``line`` and ``column``
    locate it."""


class OutOfMemoryError(Error, MemoryError):
    """An allocation failed or a size limit was exceeded (``TS_ENOMEM``)."""


class FileError(Error, OSError):
    """A file that cannot be read or written (``TS_EIO``), or a database
    server that cannot be reached."""


class NotFoundError(Error, LookupError):
    """A named thing does not exist (``TS_ENOTFOUND``): an unknown workload,
    no record for a target, a missing file."""


class MissingFileError(NotFoundError, FileNotFoundError):
    """A file that does not exist."""


class UnsupportedError(Error):
    """A valid request this build or machine cannot serve
    (``TS_EUNSUPPORTED``)."""


class RuntimeFault(Error, RuntimeError):
    """An out-of-bounds access or arithmetic fault at run time
    (``TS_ERANGE``), or a compiled model that failed."""


class VerifyError(InvalidError):
    """Ill-formed IR (``TS_EVERIFY``)."""


class ScheduleError(InvalidError):
    """A schedule primitive refused an illegal request (``TS_ESCHEDULE``)."""


class InternalError(Error, RuntimeError):
    """A broken internal invariant: a bug in tessera (``TS_EINTERNAL``)."""


_BY_CODE = {
    -1: InvalidError,
    -2: OutOfMemoryError,
    -3: ParseError,
    -4: FileError,
    -5: NotFoundError,
    -6: UnsupportedError,
    -7: RuntimeFault,
    -8: VerifyError,
    -9: ScheduleError,
    -10: InternalError,
}


def error_for_code(code: int, message: str, line: int = 0, column: int = 0) -> Error:
    """The exception for a C error code (``Error`` itself for an unknown
    code)."""
    cls: Optional[type[Error]] = _BY_CODE.get(code)
    if cls is FileError and ("No such file" in message or "does not exist" in message):
        cls = MissingFileError
    return (cls or Error)(message, code=code, line=line, column=column)


__all__ = [
    "Error",
    "InvalidError",
    "ParseError",
    "OutOfMemoryError",
    "FileError",
    "NotFoundError",
    "MissingFileError",
    "UnsupportedError",
    "RuntimeFault",
    "VerifyError",
    "ScheduleError",
    "InternalError",
    "error_for_code",
]
