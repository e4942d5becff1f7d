"""The one error type commands raise: printed as one line, mapped to an exit code."""


class CommandError(Exception):
    """A request or check failed (exit 1) or the input was bad (exit 2)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def usage_error(message: str) -> CommandError:
    return CommandError(message, exit_code=2)
