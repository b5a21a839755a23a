"""Per-key result codes of storage operations.

The negative values mirror Mooncake's ``ErrorCode`` (mooncake-store types.h) so that a code
means the same thing whichever backend produced it. Codes below -2000 are tiercheck's own.
Success is 0 for put/delete and the number of bytes read for get (``>= 0`` in both cases).
"""

OK = 0

# Mooncake's codes (the ones the L3 tier can meet).
INTERNAL_ERROR = -1
NO_AVAILABLE_HANDLE = -200  # store full ("no space")
INVALID_KEY = -400
INVALID_PARAMS = -600  # e.g. Mooncake: destination buffer smaller than the object
REPLICA_IS_NOT_READY = -703
OBJECT_NOT_FOUND = -704  # a miss
OBJECT_ALREADY_EXISTS = -705  # Mooncake's batch put reports this as 0; kept for completeness
OBJECT_HAS_LEASE = -706
TRANSFER_FAIL = -800
CHECKSUM_MISMATCH = -801  # stored bytes fail their checksum / header: never served
RPC_FAIL = -900  # outcome UNKNOWN (master unreachable), not "absent"
RPC_TIMEOUT = -901  # outcome UNKNOWN (master unresponsive), not "absent"

NO_SPACE = NO_AVAILABLE_HANDLE

# tiercheck's own codes.
CANCELLED = -2001  # the op was cancelled before this page was attempted (worker closed)
NOT_ATTEMPTED = -2002  # not attempted: page budget exhausted or an earlier page failed
LENGTH_MISMATCH = -2003  # stored object size differs from the destination page size

# batch_exists answers (Mooncake's batch_is_exist convention).
EXISTS = 1
ABSENT = 0
EXISTS_ERROR = -1

_NAMES = {v: k for k, v in sorted(globals().items()) if k.isupper() and isinstance(v, int)
          and k not in ("NO_SPACE", "EXISTS", "ABSENT", "EXISTS_ERROR", "OK")}
_NAMES[OK] = "OK"


def name(code: int) -> str:
    """Readable name of a put/get/delete code (``"E<code>"`` when unknown)."""
    if code > 0:
        return "OK"
    return _NAMES.get(code, f"E{code}")


def is_unknown(code: int) -> bool:
    """True when the outcome is unknown: the write/read may or may not have happened."""
    return code in (RPC_FAIL, RPC_TIMEOUT)


def completed_prefix(results) -> int:
    """Number of leading successes (code >= 0) in per-key put/get results.

    Only this prefix counts as completed: an ack with a failure in the middle does not
    make the pages after the failure durable, even if they were written.
    """
    n = 0
    for r in results:
        if r < 0:
            break
        n += 1
    return n
