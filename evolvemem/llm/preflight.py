"""Preflight: is the model endpoint there at all, before any work is done?

A closed port or a dead host would otherwise surface as one failed call per question after the
memories were built. One GET of `{api_base}/models` (any HTTP answer, even 404, means a server is
listening) turns that into one line naming the endpoint, the models behind it and the reason.
Without an `api_base` (a hosted provider) there is nothing local to check."""
from __future__ import annotations

import socket
import urllib.error
import urllib.request

PREFLIGHT_TIMEOUT = 10.0


def endpoint_problem(api_base: str, timeout: float = PREFLIGHT_TIMEOUT) -> str | None:
    """None when a server answers at `api_base`, else why not (connection refused, no answer, …)."""
    url = f"{api_base.rstrip('/')}/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout):  # noqa: S310 - the user's own endpoint
            return None
    except urllib.error.HTTPError:
        return None  # a server answered, just not this route
    except (socket.timeout, TimeoutError):
        return f"no answer within {timeout:.0f} s"
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return f"no answer within {timeout:.0f} s"
        return str(getattr(reason, "strerror", None) or reason)
    except (OSError, ValueError) as exc:
        return str(exc)
