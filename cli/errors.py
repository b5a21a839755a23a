"""The one error type that the command line turns into a one-line message and exit 2."""


class UserError(Exception):
    """Bad input from the user: a malformed model, an unknown name, a corrupt trace.

    The message must be one line and name the offending file/key/value; the CLI prints
    ``tiercheck: <message>`` and exits 2, never a traceback.
    """

    exit_code = 2
